// The FFI extension: typed XLA FFI handlers (jax.ffi) registered here run on the simulator's
// engine build, which keeps its own handler registry (engine/sim/ffi_handlers.h forwards them).
// User types and per-execution user data are not forwarded yet: those two return UNIMPLEMENTED.
#include <algorithm>
#include <cctype>
#include <string>

#include "api/common.h"
#include "engine/sim/ffi_handlers.h"

namespace pjrt_neuron::api {
namespace {

// A handler is host code, so it serves this plugin's devices and the host's names for them.
bool ServesPlatform(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name == "neuron" || name == "host" || name == "cpu";
}

Status RegisterHandlerBody(PJRT_FFI_Register_Handler_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_FFI_Register_Handler_Args, platform_name_size);
  if (args->target_name == nullptr || args->target_name_size == 0) return InvalidArgument("`target_name` is empty");
  if (args->handler == nullptr) return InvalidArgument("`handler` is null");
  if (args->platform_name == nullptr) return InvalidArgument("`platform_name` is null");
  const std::string platform(args->platform_name, args->platform_name_size);
  if (!ServesPlatform(platform)) {
    return InvalidArgument("platform '" + platform + "' is not this plugin's; a handler for NeuronCores is "
                           "registered for platform 'neuron' and runs on the host CPU");
  }
  const uint32_t traits = PN_HAS(args, PJRT_FFI_Register_Handler_Args, traits) ? args->traits : 0;
  return engine::sim::RegisterFfiHandler(std::string(args->target_name, args->target_name_size), args->handler,
                                         traits);
}

PJRT_Error* RegisterHandler(PJRT_FFI_Register_Handler_Args* args) {
  return Run("PJRT_FFI_Register_Handler", [args] { return RegisterHandlerBody(args); });
}

PJRT_Error* TypeIdRegister(PJRT_FFI_TypeID_Register_Args*) {
  return Run("PJRT_FFI_TypeID_Register", [] {
    return Unimplemented("not implemented by pjrt-neuron: FFI user types are not forwarded to the engine yet");
  });
}

PJRT_Error* UserDataAdd(PJRT_FFI_UserData_Add_Args*) {
  return Run("PJRT_FFI_UserData_Add", [] {
    return Unimplemented("not implemented by pjrt-neuron: FFI user data is not forwarded to the engine yet");
  });
}

PJRT_FFI_Extension ffi_extension = {
    {sizeof(PJRT_FFI_Extension), PJRT_Extension_Type_FFI, nullptr},
    TypeIdRegister,
    UserDataAdd,
    RegisterHandler,
};

}  // namespace

PJRT_Extension_Base* FfiExtension(PJRT_Extension_Base* next) {
  ffi_extension.base.next = next;
  return &ffi_extension.base;
}

}  // namespace pjrt_neuron::api
