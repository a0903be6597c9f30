// FFI handlers forwarded to the engine builds (ffi_handlers.h).
#include "engine/sim/ffi_handlers.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "common/extension_type.h"

namespace pjrt_neuron::engine::sim {
namespace {

struct Registration {
  std::string target;
  void* handler;
  uint32_t traits;
};

// Handlers and builds live as long as the process (a loaded build is never unloaded).
std::mutex& Mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<Registration>& Registrations() {
  static std::vector<Registration> registrations;
  return registrations;
}
std::vector<const PJRT_Api*>& Builds() {
  static std::vector<const PJRT_Api*> builds;
  return builds;
}

const PJRT_FFI_Extension* FfiExtension(const PJRT_Api* api) {
  for (const PJRT_Extension_Base* e = api->extension_start; e != nullptr; e = e->next) {
    if (!IsExtensionOfType(e, PJRT_Extension_Type_FFI)) continue;
    // Builds before register_handler (extension version 1) cannot take handlers.
    if (e->struct_size < offsetof(PJRT_FFI_Extension, register_handler) + sizeof(void*)) return nullptr;
    const auto* ffi = reinterpret_cast<const PJRT_FFI_Extension*>(e);
    return ffi->register_handler != nullptr ? ffi : nullptr;
  }
  return nullptr;
}

Status Forward(const PJRT_Api* api, const Registration& r) {
  const PJRT_FFI_Extension* ffi = FfiExtension(api);
  if (ffi == nullptr) return Status::Ok();  // its compiler then names the missing handler
  static const char kHost[] = "Host";       // the engine's own platform: handlers run on the host CPU
  PJRT_FFI_Register_Handler_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = sizeof(args);
  args.target_name = r.target.data();
  args.target_name_size = r.target.size();
  args.handler = r.handler;
  args.platform_name = kHost;
  args.platform_name_size = sizeof(kHost) - 1;
  args.traits = r.traits;
  PJRT_Error* error = ffi->register_handler(&args);
  if (error == nullptr) return Status::Ok();
  PJRT_Error_Message_Args message;
  std::memset(&message, 0, sizeof(message));
  message.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  message.error = error;
  api->PJRT_Error_Message(&message);
  std::string text(message.message, message.message_size);
  PJRT_Error_Destroy_Args destroy;
  std::memset(&destroy, 0, sizeof(destroy));
  destroy.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return Internal("the simulator engine refused FFI handler '" + r.target + "': " + text);
}

}  // namespace

Status RegisterFfiHandler(const std::string& target, void* handler, uint32_t traits) {
  std::lock_guard<std::mutex> lock(Mutex());
  Registration r{target, handler, traits};
  for (const PJRT_Api* api : Builds()) PN_RETURN_IF_ERROR(Forward(api, r));
  Registrations().push_back(std::move(r));
  return Status::Ok();
}

Status AdoptFfiHandlers(const PJRT_Api* api) {
  std::lock_guard<std::mutex> lock(Mutex());
  Builds().push_back(api);
  for (const Registration& r : Registrations()) PN_RETURN_IF_ERROR(Forward(api, r));
  return Status::Ok();
}

bool HasFfiHandlers() {
  std::lock_guard<std::mutex> lock(Mutex());
  return !Registrations().empty();
}

}  // namespace pjrt_neuron::engine::sim
