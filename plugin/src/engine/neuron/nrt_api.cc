// Binds the Neuron runtime's calls from libnrt.so.1 (nrt_api.h).
#include "engine/neuron/nrt_api.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <mutex>
#include <set>

namespace pjrt_neuron::engine::neuron {

uint64_t TensorCount(const NrtTensorInfoArray& info) {
  const uint64_t count = info.tensor_count;
  return (count >> 32) != 0 ? (count & 0xffffffffu) : count;
}

const NrtTensorInfo& TensorAt(const NrtTensorInfoArray& info, uint64_t i) {
  // The array starts at the first offset aligned for its entries, after the count.
  constexpr size_t kArrayOffset = (sizeof(uint64_t) + alignof(NrtTensorInfo) - 1) / alignof(NrtTensorInfo) *
                                  alignof(NrtTensorInfo);
  const char* base = reinterpret_cast<const char*>(&info) + kArrayOffset;
  return reinterpret_cast<const NrtTensorInfo*>(base)[i];
}

NrtLibrary::~NrtLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

namespace {

std::mutex& ExplicitMutex() {
  static std::mutex m;
  return m;
}

std::set<std::string>& ExplicitPaths() {
  static std::set<std::string> paths;
  return paths;
}

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* slot) {
  *slot = reinterpret_cast<Fn>(dlsym(handle, name));
  return *slot != nullptr;
}

}  // namespace

StatusOr<std::shared_ptr<NrtLibrary>> NrtLibrary::Open(const std::string& path) {
  // One handle per path, shared: the runtime keeps process-wide state.
  static std::mutex mutex;
  static std::weak_ptr<NrtLibrary> open;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto existing = open.lock()) {
    if (existing->path_ == path) return existing;
    return FailedPrecondition("the Neuron runtime is already loaded from '" + existing->path_ +
                              "' in this process; cannot also load '" + path + "'");
  }
  dlerror();
  // NODELETE: the runtime's threads may outlive nrt_close; unmapping their code would crash.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* why = dlerror();
    return FailedPrecondition("cannot load the Neuron runtime '" + path + "': " + (why ? why : "unknown error"));
  }
  std::shared_ptr<NrtLibrary> library(new NrtLibrary());
  library->handle_ = handle;
  library->path_ = path;
  NrtApi& a = library->api_;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto* slot) {
    if (!Bind(handle, name, slot) && missing == nullptr) missing = name;
  };
  need("nrt_init", &a.init);
  need("nrt_close", &a.close);
  need("nrt_load", &a.load);
  need("nrt_load_collectives", &a.load_collectives);
  need("nrt_unload", &a.unload);
  need("nrt_get_model_tensor_info", &a.get_model_tensor_info);
  need("nrt_free_model_tensor_info", &a.free_model_tensor_info);
  need("nrt_tensor_allocate", &a.tensor_allocate);
  need("nrt_tensor_free", &a.tensor_free);
  need("nrt_tensor_read", &a.tensor_read);
  need("nrt_tensor_write", &a.tensor_write);
  need("nrt_allocate_tensor_set", &a.allocate_tensor_set);
  need("nrt_destroy_tensor_set", &a.destroy_tensor_set);
  need("nrt_add_tensor_to_tensor_set", &a.add_tensor_to_tensor_set);
  need("nrt_execute", &a.execute);
  need("nrt_get_visible_vnc_count", &a.get_visible_vnc_count);
  if (missing != nullptr) {
    return FailedPrecondition("'" + path + "' is not a usable Neuron runtime: it does not export " + missing);
  }
  Bind(handle, "nrt_tensor_get_size", &a.tensor_get_size);
  Bind(handle, "nrt_tensor_copy", &a.tensor_copy);
  Bind(handle, "nrt_get_vnc_memory_stats", &a.get_vnc_memory_stats);
  Bind(handle, "nrt_get_total_vnc_count", &a.get_total_vnc_count);
  Bind(handle, "nrt_get_instance_info", &a.get_instance_info);
  Bind(handle, "nrt_get_status_as_str", &a.get_status_as_str);
  Bind(handle, "nrt_get_version", &a.get_version);
  if (path != kDefaultNrtLibrary) {
    std::lock_guard<std::mutex> explicit_lock(ExplicitMutex());
    ExplicitPaths().insert(RealPath(path));
  }
  open = library;
  return library;
}

std::string NrtLibrary::DefaultNameTakenByExplicitPath() {
  void* handle = dlopen(kDefaultNrtLibrary, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return "";
  std::string file;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) file = map->l_name;
  dlclose(handle);
  std::lock_guard<std::mutex> lock(ExplicitMutex());
  return !file.empty() && ExplicitPaths().count(RealPath(file)) > 0 ? file : "";
}

}  // namespace pjrt_neuron::engine::neuron
