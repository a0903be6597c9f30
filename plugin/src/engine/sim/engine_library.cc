// Loading the simulator's engine library and reading its errors (engine_library.h).
#include "engine/sim/engine_library.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "common/tool_process.h"
#include "engine/sim/ffi_handlers.h"

namespace pjrt_neuron::engine::sim {
namespace {

// pip installs the xla-cpu-pjrt wheel beside our package, in the same site-packages.
std::string DefaultLibraryPath() {
  const std::string self = PluginLibraryPath();
  if (self.empty()) return "xla_cpu_pjrt.so";
  std::string package_dir = self.substr(0, self.find_last_of('/'));
  std::string site_packages = package_dir.substr(0, package_dir.find_last_of('/'));
  return site_packages + "/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
}

}  // namespace

Status TakeError(const PJRT_Api* api, PJRT_Error* error) {
  if (error == nullptr) return Status::Ok();
  INNER_ARGS(PJRT_Error_Message_Args, message);
  message.error = error;
  api->PJRT_Error_Message(&message);
  INNER_ARGS(PJRT_Error_GetCode_Args, code);
  code.error = error;
  PJRT_Error* code_error = api->PJRT_Error_GetCode(&code);
  ErrorCode status_code = code_error == nullptr ? static_cast<ErrorCode>(code.code) : ErrorCode::kUnknown;
  std::string text(message.message, message.message_size);
  // The engine names its own PJRT function; ours already leads the message.
  if (text.rfind("PJRT_", 0) == 0) {
    size_t colon = text.find(": ");
    if (colon != std::string::npos && text.find(' ') > colon) text.erase(0, colon + 2);
  }
  INNER_ARGS(PJRT_Error_Destroy_Args, destroy);
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return Status(status_code == ErrorCode::kOk ? ErrorCode::kUnknown : status_code, text);
}

// Several builds may be loaded at once (JAX's client on one, torch-xla's on another: config.py).
StatusOr<const PJRT_Api*> LoadApi(const std::string& requested_path) {
  static std::mutex mutex;
  static std::map<std::string, const PJRT_Api*> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  std::string path = requested_path.empty() ? DefaultLibraryPath() : requested_path;
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return FailedPrecondition("cannot load the simulator engine '" + path + "': " + (why ? why : "unknown error") +
                              "; install it with `pip install xla-cpu-pjrt==0.0.1` or set PJRT_NEURON_ENGINE_LIBRARY");
  }
  // The library stays loaded: XLA's CPU runtime keeps threads and statics alive.
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) return FailedPrecondition("'" + path + "' does not export GetPjrtApi");
  const PJRT_Api* api = get_api();
  if (api == nullptr || api->pjrt_api_version.major_version != PJRT_API_MAJOR ||
      api->struct_size < PJRT_Api_STRUCT_SIZE) {
    return FailedPrecondition("'" + path + "' speaks an incompatible PJRT version; expected " +
                              std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR) + " or newer");
  }
  INNER_ARGS(PJRT_Plugin_Initialize_Args, init);
  PN_RETURN_IF_ERROR(TakeError(api, api->PJRT_Plugin_Initialize(&init)));
  loaded[path] = api;
  PN_RETURN_IF_ERROR(AdoptFfiHandlers(api));
  return api;
}

}  // namespace pjrt_neuron::engine::sim
