// FFI handlers registered through the plugin's FFI extension, kept for the life of the process
// and handed to every engine build loaded in it, now or later (each build has its own registry).
//
// The FFI extension's ABI (version 2) is declared here from openxla/xla's public description,
// since the engine wheel ships only pjrt_c_api.h; the plugin's extension (api/) offers it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "pjrt_c_api.h"

extern "C" {
struct PJRT_FFI_TypeID_Register_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* type_name;
  size_t type_name_size;
  int64_t type_id;
};
struct PJRT_FFI_UserData_Add_Args;  // not offered (api/ffi_extension.cc says why)
struct PJRT_FFI_Register_Handler_Args {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // an XLA_FFI_Handler* (typed FFI)
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;
};
struct PJRT_FFI_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*type_id_register)(PJRT_FFI_TypeID_Register_Args*);
  PJRT_Error* (*user_data_add)(PJRT_FFI_UserData_Add_Args*);
  PJRT_Error* (*register_handler)(PJRT_FFI_Register_Handler_Args*);
};
}

namespace pjrt_neuron::engine::sim {

// Records the handler and registers it with every loaded engine build, on its host platform.
Status RegisterFfiHandler(const std::string& target, void* handler, uint32_t traits);

// Registers every recorded handler with `api`, a build just loaded, and every later one too.
Status AdoptFfiHandlers(const PJRT_Api* api);

// Whether any handler was registered: its code lives in this process only, so programs are then
// compiled here rather than in the compile helper.
bool HasFfiHandlers();

}  // namespace pjrt_neuron::engine::sim
