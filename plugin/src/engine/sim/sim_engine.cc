// Simulated NeuronCores: the XLA CPU PJRT plugin (xla-cpu-pjrt wheel) does the arithmetic,
// one CPU device per NeuronCore. It is loaded with dlopen and called at its own PJRT
// version, with full-size argument structs, whatever version our caller speaks.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/block_pool.h"
#include "common/settings.h"
#include "common/tool_process.h"
#include "engine/sim/compile_helper.h"
#include "engine/sim/ffi_handlers.h"
#include "engine/sim/sim_engine.h"
#include "hlo/collective_program.h"
#include "hlo/compile_options.h"
#include "hlo/hlo_fields.h"
#include "hlo/output_placement.h"

namespace pjrt_neuron::engine {
namespace {

// An executable whose outputs go to host memory (output_placement.h) says which in a trailer
// after the engine's serialized bytes, so cached and deserialized copies keep it.
constexpr char kHostOutputsMagic[] = "pjrt-neuron-host-outputs/1";

std::string WithHostOutputs(std::string bytes, const std::vector<std::string>& kinds) {
  std::string list;
  for (const std::string& kind : kinds) list += (list.empty() ? "" : ",") + (kind.empty() ? "-" : kind);
  const uint32_t size = static_cast<uint32_t>(list.size());
  bytes += list;
  bytes.append(reinterpret_cast<const char*>(&size), sizeof size);
  bytes += kHostOutputsMagic;
  return bytes;
}

// The engine's bytes of `bytes`, and the output memory kinds of its trailer if it has one.
std::string SplitHostOutputs(const std::string& bytes, std::vector<std::string>* kinds) {
  const size_t magic = sizeof kHostOutputsMagic - 1;
  uint32_t size = 0;
  if (bytes.size() < magic + sizeof size || bytes.compare(bytes.size() - magic, magic, kHostOutputsMagic) != 0) {
    return bytes;
  }
  std::memcpy(&size, bytes.data() + bytes.size() - magic - sizeof size, sizeof size);
  if (size > bytes.size() - magic - sizeof size) return bytes;
  const size_t list_at = bytes.size() - magic - sizeof size - size;
  std::stringstream list(bytes.substr(list_at, size));
  for (std::string kind; std::getline(list, kind, ',');) kinds->push_back(kind == "-" ? "" : kind);
  return bytes.substr(0, list_at);
}

void RemoveTree(const std::string& directory) {
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = directory + "/" + name;
      if (unlink(path.c_str()) != 0) RemoveTree(path);
    }
    closedir(dir);
  }
  rmdir(directory.c_str());
}

// The module XLA's dump holds as it was before any pass (an HloProto; the module is field 1).
StatusOr<std::string> ModuleBeforeOptimizations(const std::string& directory) {
  std::string found;
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      const std::string suffix = ".before_optimizations.hlo.pb";
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        found = directory + "/" + name;
      }
    }
    closedir(dir);
  }
  if (found.empty()) return Internal("the engine wrote no module before optimizations in " + directory);
  std::ifstream in(found, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string module = hlo::HloModuleBytes(bytes.str(), true);
  if (module.empty()) return Internal(found + " holds no HloModuleProto");
  return module;
}

// The engine copies to the host on its worker threads, where page faults on untouched
// destination memory (a fresh numpy array, say) made 32 MiB copies 20 times slower than into
// touched memory. Faulting the pages in here first costs one pass.
constexpr size_t kPrefaultBytes = size_t{1} << 20;

void PrefaultForWrite(void* dst, size_t size) {
  if (dst == nullptr || size < kPrefaultBytes) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(dst) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(dst) + size) / page * page;
  if (end <= begin) return;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
  // Kernels before 5.14: write each page's first byte back to itself.
  for (uintptr_t p = begin; p < end; p += page) {
    volatile char* byte = reinterpret_cast<char*>(p);
    *byte = *byte;
  }
}

// Whether `layout` is the dense major-to-minor layout of a rank-`rank` array (no tiles).
bool IsDenseDefault(const PJRT_Buffer_MemoryLayout& layout, size_t rank) {
  if (layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled) return false;
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout.tiled;
  if (tiled.num_tiles != 0 || tiled.minor_to_major_size != rank) return false;
  for (size_t i = 0; i < rank; ++i) {
    if (tiled.minor_to_major[i] != static_cast<int64_t>(rank - 1 - i)) return false;
  }
  return true;
}

// A program's outputs: their shapes, and their on-device sizes once the engine has told one
// execution's (the same for every execution). Shared with output buffers, which may outlive
// the executable.
struct OutputTable {
  explicit OutputTable(std::vector<OutputShape> output_shapes)
      : shapes(std::move(output_shapes)), sizes(new std::atomic<int64_t>[shapes.size()]) {
    for (size_t i = 0; i < shapes.size(); ++i) sizes[i].store(-1, std::memory_order_relaxed);
  }
  const std::vector<OutputShape> shapes;
  std::unique_ptr<std::atomic<int64_t>[]> sizes;  // -1: not asked yet
};

// Bytes per element of the types a host upload may copy itself; 0: leave the upload to the engine.
size_t WholeByteElementSize(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED: case PJRT_Buffer_Type_S8: case PJRT_Buffer_Type_U8: return 1;
    case PJRT_Buffer_Type_S16: case PJRT_Buffer_Type_U16: case PJRT_Buffer_Type_F16: case PJRT_Buffer_Type_BF16:
      return 2;
    case PJRT_Buffer_Type_S32: case PJRT_Buffer_Type_U32: case PJRT_Buffer_Type_F32: return 4;
    case PJRT_Buffer_Type_S64: case PJRT_Buffer_Type_U64: case PJRT_Buffer_Type_F64: case PJRT_Buffer_Type_C64:
      return 8;
    case PJRT_Buffer_Type_C128: return 16;
    default: return 0;
  }
}

// Whether `strides` (may be null) describe the dense major-to-minor layout of `dims`.
bool IsDenseRowMajor(const std::vector<int64_t>& dims, const int64_t* strides, size_t num_strides,
                     size_t element_size) {
  if (strides == nullptr) return true;
  if (num_strides != dims.size()) return false;
  int64_t expected = static_cast<int64_t>(element_size);
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] != 1 && strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

// Uploads from this size on are copied by the plugin (below it the engine's allocator reuses
// memory that is already faulted in, and does better).
constexpr size_t kOwnUploadBytes = size_t{4} << 20;

// Host memory for uploaded arrays, mapped here rather than by the engine: the engine copies
// into memory it has just allocated, and faulting those pages in one at a time made large
// uploads run at half of memcpy speed or worse. Huge pages where the kernel offers them; a
// freed region is kept (up to kKeptBytes in all) for the next upload of the same size, as an
// allocator keeps freed memory. Buffers' bytes are charged to HBM by core; kept regions hold
// no buffer.
class UploadMemory {
 public:
  static UploadMemory& Get() {
    static auto* memory = new UploadMemory();  // outlives static destructors and late frees
    return *memory;
  }
  void* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < kept_.size(); ++i) {
        if (kept_[i].second == bytes) {
          void* region = kept_[i].first;
          kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
          kept_bytes_ -= bytes;
          return region;
        }
      }
    }
    void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
    madvise(region, bytes, MADV_HUGEPAGE);
#endif
    return region;
  }
  void Give(void* region, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (kept_bytes_ + bytes <= kKeptBytes) {
        kept_.emplace_back(region, bytes);
        kept_bytes_ += bytes;
        return;
      }
    }
    munmap(region, bytes);
  }

 private:
  static constexpr size_t kKeptBytes = size_t{512} << 20;
  std::mutex mutex_;
  std::vector<std::pair<void*, size_t>> kept_;
  size_t kept_bytes_ = 0;
};

#define INNER_ARGS(type, var) \
  type var;                   \
  std::memset(&var, 0, sizeof(var)); \
  var.struct_size = type##_STRUCT_SIZE

class SimEngine;

// Turns an inner PJRT_Error into a Status and frees it.
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

Attributes ToAttributes(const PJRT_NamedValue* values, size_t count) {
  Attributes out;
  for (size_t i = 0; i < count; ++i) {
    const PJRT_NamedValue& v = values[i];
    Attribute a{std::string(v.name, v.name_size), int64_t{0}};
    switch (v.type) {
      case PJRT_NamedValue_kString: a.value = std::string(v.string_value, v.value_size); break;
      case PJRT_NamedValue_kInt64: a.value = v.int64_value; break;
      case PJRT_NamedValue_kInt64List:
        a.value = std::vector<int64_t>(v.int64_array_value, v.int64_array_value + v.value_size);
        break;
      case PJRT_NamedValue_kFloat: a.value = v.float_value; break;
      case PJRT_NamedValue_kBool: a.value = v.bool_value; break;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string DefaultLibraryPath();

// Loads and initialises each engine library once per process; later calls reuse it. Several
// builds may be loaded at once (JAX's client on one, torch-xla's on another: config.py).
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
  PN_RETURN_IF_ERROR(sim::AdoptFfiHandlers(api));
  return api;
}

// pip installs the xla-cpu-pjrt wheel beside our package, in the same site-packages.
std::string DefaultLibraryPath() {
  const std::string self = PluginLibraryPath();
  if (self.empty()) return "xla_cpu_pjrt.so";
  std::string package_dir = self.substr(0, self.find_last_of('/'));
  std::string site_packages = package_dir.substr(0, package_dir.find_last_of('/'));
  return site_packages + "/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so";
}

class SimEvent : public Event {
 public:
  SimEvent(const PJRT_Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  ~SimEvent() override {
    INNER_ARGS(PJRT_Event_Destroy_Args, args);
    args.event = event_;
    TakeError(api_, api_->PJRT_Event_Destroy(&args));
  }
  // An execution's event is shared by its outputs and asked about once per output, so once
  // the engine has said how it ended, the answer is kept and given without asking again.
  bool IsReady() override {
    if (ready_.load(std::memory_order_acquire)) return true;
    INNER_ARGS(PJRT_Event_IsReady_Args, args);
    args.event = event_;
    if (!TakeError(api_, api_->PJRT_Event_IsReady(&args)).ok()) return true;
    if (args.is_ready) ready_.store(true, std::memory_order_release);
    return args.is_ready;
  }
  Status Await() override {
    if (outcome_known_.load(std::memory_order_acquire)) return outcome_;
    INNER_ARGS(PJRT_Event_Await_Args, args);
    args.event = event_;
    Status outcome = TakeError(api_, api_->PJRT_Event_Await(&args));
    bool unclaimed = false;
    if (outcome_claimed_.compare_exchange_strong(unclaimed, true)) {
      outcome_ = outcome;
      outcome_known_.store(true, std::memory_order_release);
    }
    return outcome;
  }
  void OnReady(std::function<void(Status)> done) override {
    if (IsReady()) {
      done(Await());
      return;
    }
    struct Pending {
      const PJRT_Api* api;
      std::function<void(Status)> done;
    };
    auto* pending = new Pending{api_, std::move(done)};
    INNER_ARGS(PJRT_Event_OnReady_Args, args);
    args.event = event_;
    args.user_arg = pending;
    args.callback = [](PJRT_Error* error, void* user_arg) {
      std::unique_ptr<Pending> p(static_cast<Pending*>(user_arg));
      p->done(TakeError(p->api, error));
    };
    // The callback may run at once and destroy this event (found by AddressSanitizer: JAX
    // destroys its event in the callback), so nothing of `this` is read after the call.
    const PJRT_Api* api = api_;
    Status registered = TakeError(api, api->PJRT_Event_OnReady(&args));
    if (!registered.ok()) {
      std::unique_ptr<Pending> p(pending);
      p->done(registered);
    }
  }

 private:
  const PJRT_Api* api_;
  PJRT_Event* event_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> outcome_claimed_{false};  // one Await writes outcome_
  std::atomic<bool> outcome_known_{false};
  Status outcome_;
};

EventRef WrapEvent(const PJRT_Api* api, PJRT_Event* event) {
  if (event == nullptr) return std::make_shared<CompletedEvent>();
  return std::allocate_shared<SimEvent>(PoolAllocator<SimEvent>(), api, event);
}

class SimBuffer : public Buffer, public Pooled<SimBuffer> {
 public:
  SimBuffer(SimEngine* engine, PJRT_Buffer* buffer);
  // An execution's output: its shape and place are known, so the engine is not asked again.
  SimBuffer(SimEngine* engine, PJRT_Buffer* buffer, std::shared_ptr<OutputTable> outputs, size_t index, int core);
  ~SimBuffer() override {
    INNER_ARGS(PJRT_Buffer_Destroy_Args, args);
    args.buffer = buffer_;
    TakeError(api_, api_->PJRT_Buffer_Destroy(&args));
  }
  PJRT_Buffer* inner() { return buffer_; }
  Native<PJRT_Buffer> NativeBuffer() override { return {api_, buffer_}; }
  int core() override;
  const std::string& memory_kind() override;
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return outputs_ ? outputs_->shapes[output_index_].dims : dims_; }

  StatusOr<size_t> OnDeviceSizeInBytes() override {
    if (outputs_) {
      int64_t known = outputs_->sizes[output_index_].load(std::memory_order_relaxed);
      if (known >= 0) return static_cast<size_t>(known);
    }
    INNER_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, args);
    args.buffer = buffer_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_OnDeviceSizeInBytes(&args)));
    if (outputs_) {
      outputs_->sizes[output_index_].store(static_cast<int64_t>(args.on_device_size_in_bytes),
                                           std::memory_order_relaxed);
    }
    return args.on_device_size_in_bytes;
  }

  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override {
    if (dst != nullptr && (host_layout == nullptr || IsDenseDefault(*host_layout, dims().size())) &&
        CopiedDirectly(dst, dst_size, required_size)) {
      return EventRef(std::make_shared<CompletedEvent>());
    }
    INNER_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
    args.src = buffer_;
    args.host_layout = const_cast<PJRT_Buffer_MemoryLayout*>(host_layout);
    args.dst = dst;
    args.dst_size = dst_size;
    PrefaultForWrite(dst, dst_size);
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_ToHostBuffer(&args)));
    if (required_size != nullptr) *required_size = args.dst_size;
    return WrapEvent(api_, args.event);
  }

  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override {
    INNER_ARGS(PJRT_Buffer_CopyRawToHost_Args, args);
    args.buffer = buffer_;
    args.dst = dst;
    args.offset = offset;
    args.transfer_size = size;
    PrefaultForWrite(dst, static_cast<size_t>(size));
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_CopyRawToHost(&args)));
    return WrapEvent(api_, args.event);
  }

  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override;

  // Copies a ready buffer in the dense default layout straight from its memory (simulated HBM
  // is host memory), held against donation meanwhile. The engine's own copy hands the work to
  // its thread pool and the caller waits for the hop: 70 us for 4 KiB (profiled). False where
  // the engine must copy: sub-byte types, a buffer not ready or failed, a tiled or permuted
  // layout, too small a destination.
  bool CopiedDirectly(void* dst, size_t dst_size, size_t* required_size) {
    const size_t element_size = WholeByteElementSize(type_);
    if (element_size == 0) return false;
    size_t bytes = element_size;
    for (int64_t d : dims()) bytes *= static_cast<size_t>(d);
    if (bytes == 0 || dst_size < bytes || !ReadyWithoutError() || !DenseDefaultLayout()) return false;
    INNER_ARGS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, hold);
    hold.buffer = buffer_;
    if (!TakeError(api_, api_->PJRT_Buffer_IncreaseExternalReferenceCount(&hold)).ok()) return false;
    INNER_ARGS(PJRT_Buffer_UnsafePointer_Args, pointer);
    pointer.buffer = buffer_;
    const bool copied = TakeError(api_, api_->PJRT_Buffer_UnsafePointer(&pointer)).ok() && pointer.buffer_pointer != 0;
    if (copied) std::memcpy(dst, reinterpret_cast<const void*>(pointer.buffer_pointer), bytes);
    INNER_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, release);
    release.buffer = buffer_;
    TakeError(api_, api_->PJRT_Buffer_DecreaseExternalReferenceCount(&release));
    if (copied && required_size != nullptr) *required_size = bytes;
    return copied;
  }

  bool ReadyWithoutError() {
    INNER_ARGS(PJRT_Buffer_ReadyEvent_Args, ready);
    ready.buffer = buffer_;
    if (!TakeError(api_, api_->PJRT_Buffer_ReadyEvent(&ready)).ok() || ready.event == nullptr) return false;
    INNER_ARGS(PJRT_Event_IsReady_Args, is_ready);
    is_ready.event = ready.event;
    bool usable = TakeError(api_, api_->PJRT_Event_IsReady(&is_ready)).ok() && is_ready.is_ready;
    if (usable) {
      INNER_ARGS(PJRT_Event_Error_Args, error);
      error.event = ready.event;
      usable = TakeError(api_, api_->PJRT_Event_Error(&error)).ok();
    }
    INNER_ARGS(PJRT_Event_Destroy_Args, destroy);
    destroy.event = ready.event;
    TakeError(api_, api_->PJRT_Event_Destroy(&destroy));
    return usable;
  }

  bool DenseDefaultLayout() {
    PJRT_Buffer_MemoryLayout layout;
    return GetMemoryLayout(&layout).ok() && IsDenseDefault(layout, dims().size());
  }

  StatusOr<EventRef> ReadyEvent() override {
    INNER_ARGS(PJRT_Buffer_ReadyEvent_Args, args);
    args.buffer = buffer_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_ReadyEvent(&args)));
    return WrapEvent(api_, args.event);
  }

  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override {
    INNER_ARGS(PJRT_Buffer_GetMemoryLayout_Args, args);
    args.buffer = buffer_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_GetMemoryLayout(&args)));
    *layout = args.layout;
    return Status::Ok();
  }

  void Delete() override {
    INNER_ARGS(PJRT_Buffer_Delete_Args, args);
    args.buffer = buffer_;
    TakeError(api_, api_->PJRT_Buffer_Delete(&args));
  }

  bool IsDeleted() override {
    INNER_ARGS(PJRT_Buffer_IsDeleted_Args, args);
    args.buffer = buffer_;
    if (!TakeError(api_, api_->PJRT_Buffer_IsDeleted(&args)).ok()) return true;
    return args.is_deleted;
  }

  StatusOr<uintptr_t> UnsafePointer() override {
    INNER_ARGS(PJRT_Buffer_UnsafePointer_Args, args);
    args.buffer = buffer_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_UnsafePointer(&args)));
    return args.buffer_pointer;
  }

  Status IncreaseExternalReferenceCount() override {
    INNER_ARGS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, args);
    args.buffer = buffer_;
    return TakeError(api_, api_->PJRT_Buffer_IncreaseExternalReferenceCount(&args));
  }

  Status DecreaseExternalReferenceCount() override {
    INNER_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, args);
    args.buffer = buffer_;
    return TakeError(api_, api_->PJRT_Buffer_DecreaseExternalReferenceCount(&args));
  }

  StatusOr<void*> OpaqueDeviceMemoryPointer() override {
    INNER_ARGS(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, args);
    args.buffer = buffer_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_OpaqueDeviceMemoryDataPointer(&args)));
    return args.device_memory_ptr;
  }

 private:
  SimEngine* engine_;
  const PJRT_Api* api_;
  PJRT_Buffer* buffer_;
  PJRT_Buffer_Type type_ = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims_;  // unless outputs_ has them
  int core_ = -1;
  std::string memory_kind_;
  std::shared_ptr<OutputTable> outputs_;  // set for an execution's outputs
  size_t output_index_ = 0;
};

class SimExecutable : public Executable {
 public:
  SimExecutable(SimEngine* engine, PJRT_LoadedExecutable* loaded);
  ~SimExecutable() override;
  Status Init();

  std::string name() override { return name_; }
  int num_replicas() override { return num_replicas_; }
  int num_partitions() override { return num_partitions_; }
  const std::vector<OutputShape>& outputs() override {
    return placed_outputs_.empty() ? outputs_->shapes : placed_outputs_;
  }
  std::vector<int> addressable_cores() override { return addressable_cores_; }
  Native<PJRT_Executable> NativeExecutable() override { return {api_, executable_}; }

  StatusOr<std::string> Fingerprint() override {
    INNER_ARGS(PJRT_Executable_Fingerprint_Args, args);
    args.executable = executable_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_Fingerprint(&args)));
    return std::string(args.executable_fingerprint, args.executable_fingerprint_size);
  }

  StatusOr<Attributes> CostAnalysis() override {
    INNER_ARGS(PJRT_Executable_GetCostAnalysis_Args, args);
    args.executable = executable_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_GetCostAnalysis(&args)));
    return ToAttributes(args.properties, args.num_properties);
  }

  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override {
    INNER_ARGS(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, args);
    args.executable = executable_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_SizeOfGeneratedCodeInBytes(&args)));
    return args.size_in_bytes;
  }

  // Asked on every execution (HBM check), so computed once.
  StatusOr<CompiledMemoryStats> MemoryStats() override {
    // A mutex, not std::call_once: call_once's thread-local state would leak out of the
    // library's export list when libstdc++ is linked statically.
    std::lock_guard<std::mutex> lock(memory_stats_mutex_);
    if (!memory_stats_computed_) {
      memory_stats_ = ComputeMemoryStats();
      memory_stats_computed_ = true;
    }
    return memory_stats_;
  }

  StatusOr<CompiledMemoryStats> ComputeMemoryStats() {
    INNER_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args, args);
    args.executable = executable_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_GetCompiledMemoryStats(&args)));
    CompiledMemoryStats stats;
    stats.generated_code_size_in_bytes = args.generated_code_size_in_bytes;
    stats.argument_size_in_bytes = args.argument_size_in_bytes;
    stats.output_size_in_bytes = args.output_size_in_bytes;
    stats.alias_size_in_bytes = args.alias_size_in_bytes;
    stats.temp_size_in_bytes = args.temp_size_in_bytes;
    stats.peak_memory_in_bytes = args.peak_memory_in_bytes;
    return stats;
  }

  // XLA CPU cannot serialize an executable it deserialized (the object code is gone), so a
  // loaded executable hands back the bytes it was loaded from.
  void set_serialized(std::string bytes) { serialized_ = std::move(bytes); }

  // Outputs of `kinds` "pinned_host" are moved to host memory after each execution.
  void PlaceOutputs(const std::vector<std::string>& kinds) {
    placed_outputs_ = outputs_->shapes;
    host_outputs_.assign(placed_outputs_.size(), false);
    for (size_t i = 0; i < placed_outputs_.size() && i < kinds.size(); ++i) {
      if (kinds[i] != "pinned_host") continue;
      host_outputs_[i] = true;
      placed_outputs_[i].memory_kind = "pinned_host";
    }
  }

  StatusOr<std::string> Serialize() override {
    PN_ASSIGN_OR_RETURN(std::string bytes, EngineBytes());
    if (placed_outputs_.empty()) return bytes;
    std::vector<std::string> kinds;
    for (const OutputShape& output : placed_outputs_) kinds.push_back(output.memory_kind);
    return WithHostOutputs(std::move(bytes), kinds);
  }

  StatusOr<std::string> EngineBytes() {
    if (serialized_.has_value()) return *serialized_;
    INNER_ARGS(PJRT_Executable_Serialize_Args, args);
    args.executable = executable_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_Serialize(&args)));
    std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
    if (args.serialized_executable_deleter != nullptr) args.serialized_executable_deleter(args.serialized_executable);
    return bytes;
  }

  StatusOr<ProgramText> OptimizedProgram() override {
    PJRT_Program program;
    std::memset(&program, 0, sizeof(program));
    program.struct_size = PJRT_Program_STRUCT_SIZE;
    INNER_ARGS(PJRT_Executable_OptimizedProgram_Args, args);
    args.executable = executable_;
    args.program = &program;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_OptimizedProgram(&args)));  // asks the size
    std::string code(program.code_size, '\0');
    program.code = code.data();
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_OptimizedProgram(&args)));
    return ProgramText{std::string(program.format, program.format_size), std::move(code)};
  }

  StatusOr<std::string> SerializedDeviceAssignment() override {
    INNER_ARGS(PJRT_LoadedExecutable_GetDeviceAssignment_Args, args);
    args.executable = loaded_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_GetDeviceAssignment(&args)));
    std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
    if (args.serialized_device_assignment_deleter != nullptr) {
      args.serialized_device_assignment_deleter(args.serialized_device_assignment);
    }
    return bytes;
  }

  Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                 ExecuteResult* result) override;

  // Newer engine builds hold every launch of a program of several cores until all its cores have
  // launched it (a per-launch barrier); a launch on one core (torch-xla's execute_device) never
  // fills it, and the engine's next launch never starts. Such launches of a program that computes
  // alike on every core run this copy instead: the same code loaded as a portable single-core
  // executable. Null when the program has collectives (its cores must meet) or reads its replica
  // or partition id (the copy would be replica 0 everywhere), or when the copy cannot be made.
  SimExecutable* SingleCoreCopy();

  void Delete() override {
    INNER_ARGS(PJRT_LoadedExecutable_Delete_Args, args);
    args.executable = loaded_;
    TakeError(api_, api_->PJRT_LoadedExecutable_Delete(&args));
  }

  bool IsDeleted() override {
    INNER_ARGS(PJRT_LoadedExecutable_IsDeleted_Args, args);
    args.executable = loaded_;
    if (!TakeError(api_, api_->PJRT_LoadedExecutable_IsDeleted(&args)).ok()) return true;
    return args.is_deleted;
  }

 private:
  SimEngine* engine_;
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* loaded_;
  PJRT_Executable* executable_ = nullptr;
  std::string name_;
  int num_replicas_ = 1;
  int num_partitions_ = 1;
  std::shared_ptr<OutputTable> outputs_ = std::make_shared<OutputTable>(std::vector<OutputShape>{});
  std::vector<int> addressable_cores_;
  std::optional<std::string> serialized_;
  std::vector<bool> host_outputs_;
  std::vector<OutputShape> placed_outputs_;  // what outputs() reports then
  std::mutex memory_stats_mutex_;
  bool memory_stats_computed_ = false;
  StatusOr<CompiledMemoryStats> memory_stats_ = Status::Ok();
  std::mutex single_core_mutex_;
  bool single_core_tried_ = false;
  std::unique_ptr<Executable> single_core_;
};

class SimEngine : public Engine {
 public:
  ~SimEngine() override {
    if (client_ != nullptr) {
      INNER_ARGS(PJRT_Client_Destroy_Args, args);
      args.client = client_;
      TakeError(api_, api_->PJRT_Client_Destroy(&args));
    }
    // The library stays loaded: XLA's CPU runtime keeps threads and statics alive.
  }

  Status Init(const EngineOptions& options) {
    PN_ASSIGN_OR_RETURN(api_, LoadApi(options.library_path));
    std::vector<PJRT_NamedValue> create_options;
    auto add_int = [&](const char* name, int64_t value) {
      PJRT_NamedValue v;
      std::memset(&v, 0, sizeof(v));
      v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
      v.name = name;
      v.name_size = std::strlen(name);
      v.type = PJRT_NamedValue_kInt64;
      v.int64_value = value;
      v.value_size = 1;
      create_options.push_back(v);
    };
    add_int("cpu_device_count", options.num_cores);
    for (const Attribute& a : options.passthrough) {
      PJRT_NamedValue v;
      std::memset(&v, 0, sizeof(v));
      v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
      v.name = a.name.c_str();
      v.name_size = a.name.size();
      v.value_size = 1;
      if (auto* b = std::get_if<bool>(&a.value)) {
        v.type = PJRT_NamedValue_kBool;
        v.bool_value = *b;
      } else if (auto* i = std::get_if<int64_t>(&a.value)) {
        v.type = PJRT_NamedValue_kInt64;
        v.int64_value = *i;
      } else {
        return InvalidArgument("engine option '" + a.name + "' must be a bool or an integer");
      }
      create_options.push_back(v);
    }
    INNER_ARGS(PJRT_Client_Create_Args, create);
    create.create_options = create_options.data();
    create.num_options = create_options.size();
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_Create(&create)));
    client_ = create.client;

    INNER_ARGS(PJRT_Client_AddressableDevices_Args, devices);
    devices.client = client_;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_AddressableDevices(&devices)));
    if (devices.num_addressable_devices != static_cast<size_t>(options.num_cores)) {
      return Internal("the XLA CPU engine made " + std::to_string(devices.num_addressable_devices) +
                      " devices, expected " + std::to_string(options.num_cores));
    }
    devices_.assign(devices.addressable_devices, devices.addressable_devices + devices.num_addressable_devices);
    for (PJRT_Device* device : devices_) {
      INNER_ARGS(PJRT_Device_AddressableMemories_Args, memories);
      memories.device = device;
      PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Device_AddressableMemories(&memories)));
      std::vector<std::pair<std::string, PJRT_Memory*>> by_kind;
      for (size_t i = 0; i < memories.num_memories; ++i) {
        by_kind.emplace_back(MemoryKind(memories.memories[i]), memories.memories[i]);
      }
      memories_.push_back(std::move(by_kind));
    }
    if (!options.compile_in_process) {
      PN_ASSIGN_OR_RETURN(bool isolate, settings::Flag(settings::Id::kCompileIsolation));
      if (isolate) helper_ = std::make_unique<CompileHelper>(options);
    }
    library_name_ = options.library_path.substr(options.library_path.find_last_of('/') + 1);
    version_ = std::to_string(api_->pjrt_api_version.major_version) + "." +
               std::to_string(api_->pjrt_api_version.minor_version);
    return Status::Ok();
  }

  const PJRT_Api* api() { return api_; }
  PJRT_Device* device(int core) { return devices_.at(core); }
  // Whether a launch of a multi-core program waits for all its cores (SimExecutable::SingleCoreCopy):
  // not on PJRT 0.81 (xla-cpu-pjrt 0.0.1), so on PJRT 0.115 (lammps-jax-pjrt-cpu 0.11.2).
  bool gates_multi_core_launches() const { return api_->pjrt_api_version.minor_version >= 100; }
  // Measured: PJRT 0.81 (xla-cpu-pjrt 0.0.1) accepts FFI handlers and its compiler never finds
  // them; PJRT 0.115 (lammps-jax-pjrt-cpu 0.11.2) runs them.
  bool runs_ffi_handlers() const { return api_->pjrt_api_version.minor_version >= 100; }
  StatusOr<PJRT_Memory*> memory(int core, const std::string& kind) {
    for (const auto& [memory_kind, memory] : memories_.at(core)) {
      if (memory_kind == kind) return memory;
    }
    return InvalidArgument("the engine has no '" + kind + "' memory on core " + std::to_string(core));
  }
  std::string MemoryKind(PJRT_Memory* memory) {
    INNER_ARGS(PJRT_Memory_Kind_Args, args);
    args.memory = memory;
    if (!TakeError(api_, api_->PJRT_Memory_Kind(&args)).ok()) return "device";
    return std::string(args.kind, args.kind_size);
  }
  int CoreOf(PJRT_Device* device) {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == device) return static_cast<int>(i);
    }
    return -1;
  }
  std::unique_ptr<Buffer> Wrap(PJRT_Buffer* buffer) { return std::make_unique<SimBuffer>(this, buffer); }
  std::unique_ptr<Buffer> WrapOutput(PJRT_Buffer* buffer, const std::shared_ptr<OutputTable>& outputs, size_t index,
                                     int core) {
    return std::make_unique<SimBuffer>(this, buffer, outputs, index, core);
  }

  // The file name tells the engine builds apart (xla_cpu_pjrt.so, pjrt_c_api_cpu_plugin.so).
  std::string description() override { return "XLA CPU (PJRT " + version_ + ", " + library_name_ + ")"; }
  int num_cores() override { return static_cast<int>(devices_.size()); }
  Native<PJRT_Client> NativeClient() override { return {api_, client_}; }

  StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) override {
    PN_ASSIGN_OR_RETURN(std::optional<TransferResult> copied, CopyFromHost(core, spec));
    if (copied.has_value()) return std::move(*copied);
    INNER_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
    args.client = client_;
    args.data = spec.data;
    args.type = spec.type;
    args.dims = spec.dims.data();
    args.num_dims = spec.dims.size();
    args.byte_strides = spec.byte_strides;
    args.num_byte_strides = spec.num_byte_strides;
    args.host_buffer_semantics = spec.semantics;
    PN_ASSIGN_OR_RETURN(args.memory, memory(core, spec.memory_kind));
    args.device_layout = spec.device_layout;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_BufferFromHostBuffer(&args)));
    TransferResult result;
    result.buffer = Wrap(args.buffer);
    if (args.done_with_host_buffer != nullptr) result.done_with_host_buffer = WrapEvent(api_, args.done_with_host_buffer);
    return result;
  }

  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims) override {
    INNER_ARGS(PJRT_Client_CreateUninitializedBuffer_Args, args);
    args.client = client_;
    args.shape_dims = dims.data();
    args.shape_num_dims = dims.size();
    args.shape_element_type = type;
    args.device = device(core);
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_CreateUninitializedBuffer(&args)));
    return Wrap(args.buffer);
  }

  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) override;

  StatusOr<AliasBuffer> CreateAliasBuffer(int core, const std::string& memory_kind, PJRT_Buffer_Type type,
                                          const std::vector<int64_t>& dims) override {
    INNER_ARGS(PJRT_Client_CreateAliasBuffer_Args, args);
    args.client = client_;
    PN_ASSIGN_OR_RETURN(args.memory, memory(core, memory_kind));
    args.shape_dims = dims.data();
    args.shape_num_dims = dims.size();
    args.shape_element_type = type;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_CreateAliasBuffer(&args)));
    AliasBuffer alias;
    alias.buffer = Wrap(args.alias_buffer);
    alias.fulfill = args.fulfill_alias_buffer_cb;
    return alias;
  }

  Status FulfillAliasBuffer(void* fulfill, Buffer* target, ErrorCode code, const std::string& message) override {
    INNER_ARGS(PJRT_Client_FulfillAliasBuffer_Args, args);
    args.client = client_;
    args.buffer = target != nullptr ? static_cast<SimBuffer*>(target)->inner() : nullptr;
    args.status_code = static_cast<PJRT_Error_Code>(code);
    args.error_message = message.c_str();
    args.error_message_size = message.size();
    args.fulfill_alias_buffer_cb = static_cast<PJRT_FulfillAliasBufferCallback*>(fulfill);
    return TakeError(api_, api_->PJRT_Client_FulfillAliasBuffer(&args));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    // A registered FFI handler's code is in this process only, out of the helper's reach.
    if (helper_ != nullptr && !helper_->cannot_start() && !sim::HasFfiHandlers()) {
      auto serialized = helper_->Compile(program, options);
      if (serialized.ok()) return Deserialize(serialized.value(), nullptr);
      if (!helper_->cannot_start()) return serialized.status();
      SayHelperCannotStart(serialized.status());
    }
    PJRT_LoadedExecutable* loaded = nullptr;
    Status compiled = CompileInEngine(program, options, &loaded);
    if (!compiled.ok() && compiled.message().find(hlo::kAnnotateDevicePlacement) != std::string::npos &&
        program.format != "hlo") {
      return CompileWithOutputPlacements(program, options, compiled);
    }
    if (!compiled.ok() && compiled.message().find("No FFI handler registered") != std::string::npos &&
        !runs_ffi_handlers()) {
      return Status(compiled.code(), compiled.message() + "; the simulator engine build " + library_name_ +
                                         " does not run FFI handlers, the newer build does: "
                                         "PJRT_NEURON_SIM_ENGINE=lammps-jax-pjrt-cpu");
    }
    PN_RETURN_IF_ERROR(compiled);
    return Finish(loaded);
  }

  Status CompileInEngine(const Program& program, const std::string& options, PJRT_LoadedExecutable** loaded) {
    PJRT_Program inner_program;
    std::memset(&inner_program, 0, sizeof(inner_program));
    inner_program.struct_size = PJRT_Program_STRUCT_SIZE;
    inner_program.code = const_cast<char*>(program.code);
    inner_program.code_size = program.code_size;
    inner_program.format = program.format.c_str();
    inner_program.format_size = program.format.size();
    INNER_ARGS(PJRT_Client_Compile_Args, args);
    args.client = client_;
    args.program = &inner_program;
    args.compile_options = options.data();
    args.compile_options_size = options.size();
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_Compile(&args)));
    *loaded = args.executable;
    return Status::Ok();
  }

  // The engine cannot place outputs in host memory (out_shardings with memory kind
  // pinned_host): it is asked for the program as it read it (a dump taken before its passes),
  // the placements come out (output_placement.h), it compiles the rest, and the executable
  // moves those outputs to host memory.
  StatusOr<std::unique_ptr<Executable>> CompileWithOutputPlacements(const Program& program, const std::string& options,
                                                                    const Status& refused) {
    const char* tmp = std::getenv("TMPDIR");
    std::string directory = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pjrt-neuron-placement-XXXXXX";
    if (mkdtemp(directory.data()) == nullptr) return refused;
    std::string dumping = options;
    const std::string no_pass = "NO_PASS_MATCHES";
    hlo::AppendOptionOverride(&dumping, "xla_dump_to", &directory, false);
    hlo::AppendOptionOverride(&dumping, "xla_dump_hlo_pass_re", &no_pass, false);
    hlo::AppendOptionOverride(&dumping, "xla_dump_hlo_as_proto", nullptr, true);
    hlo::AppendOptionOverride(&dumping, "xla_dump_hlo_as_text", nullptr, false);
    PJRT_LoadedExecutable* dumped = nullptr;
    if (CompileInEngine(program, dumping, &dumped).ok()) DestroyLoaded(dumped);
    auto module = ModuleBeforeOptimizations(directory);
    RemoveTree(directory);
    if (!module.ok()) return refused;
    PN_ASSIGN_OR_RETURN(hlo::PlacedOutputs placed, hlo::StripOutputPlacements(module.value()));
    PJRT_LoadedExecutable* loaded = nullptr;
    PN_RETURN_IF_ERROR(CompileInEngine(Program{"hlo", placed.module.data(), placed.module.size()}, options, &loaded));
    auto executable = std::make_unique<SimExecutable>(this, loaded);
    PN_RETURN_IF_ERROR(executable->Init());
    executable->PlaceOutputs(placed.output_memory_kinds);
    return std::unique_ptr<Executable>(std::move(executable));
  }

  void DestroyLoaded(PJRT_LoadedExecutable* loaded) {
    INNER_ARGS(PJRT_LoadedExecutable_Destroy_Args, args);
    args.executable = loaded;
    TakeError(api_, api_->PJRT_LoadedExecutable_Destroy(&args));
  }

  StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                    const std::string* overridden_options) override {
    std::vector<std::string> output_kinds;
    const std::string engine_bytes = SplitHostOutputs(bytes, &output_kinds);
    INNER_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
    args.client = client_;
    args.serialized_executable = engine_bytes.data();
    args.serialized_executable_size = engine_bytes.size();
    if (overridden_options != nullptr) {
      args.overridden_serialized_compile_options = overridden_options->data();
      args.overridden_serialized_compile_options_size = overridden_options->size();
    }
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_DeserializeAndLoad(&args)));
    auto executable = std::make_unique<SimExecutable>(this, args.loaded_executable);
    PN_RETURN_IF_ERROR(executable->Init());
    executable->set_serialized(engine_bytes);
    if (!output_kinds.empty()) executable->PlaceOutputs(output_kinds);
    return std::unique_ptr<Executable>(std::move(executable));
  }

  Status CheckDeserializable(const std::string& bytes, const std::string* overridden_options) override {
    if (helper_ == nullptr || helper_->cannot_start()) return Status::Ok();
    Status loads = helper_->CheckLoads(bytes, overridden_options);
    if (!loads.ok() && helper_->cannot_start()) {
      SayHelperCannotStart(loads);
      return Status::Ok();
    }
    return loads;
  }

  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) override {
    std::vector<int> assignment(static_cast<size_t>(num_replicas) * num_partitions);
    INNER_ARGS(PJRT_Client_DefaultDeviceAssignment_Args, args);
    args.client = client_;
    args.num_replicas = num_replicas;
    args.num_partitions = num_partitions;
    args.default_assignment_size = assignment.size();
    args.default_assignment = assignment.data();
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_DefaultDeviceAssignment(&args)));
    return assignment;
  }

 private:
  // Large dense uploads to device memory: copied here into UploadMemory and handed to
  // the engine as a view that gives the memory back when the buffer goes; nothing (no value)
  // when the engine should do it.
  StatusOr<std::optional<TransferResult>> CopyFromHost(int core, const HostBufferSpec& spec) {
    const size_t element_size = WholeByteElementSize(spec.type);
    if (api_->PJRT_Client_CreateViewOfDeviceBuffer == nullptr || element_size == 0 ||
        spec.device_layout != nullptr || spec.memory_kind != "device" || spec.data == nullptr ||
        spec.semantics == PJRT_HostBufferSemantics_kMutableZeroCopy ||
        !IsDenseRowMajor(spec.dims, spec.byte_strides, spec.num_byte_strides, element_size)) {
      return std::optional<TransferResult>();
    }
    size_t bytes = element_size;
    for (int64_t d : spec.dims) bytes *= static_cast<size_t>(d);
    if (bytes < kOwnUploadBytes) return std::optional<TransferResult>();
    void* memory = UploadMemory::Get().Take(bytes);
    if (memory == nullptr) return std::optional<TransferResult>();  // the engine may still find memory
    std::memcpy(memory, spec.data, bytes);
    INNER_ARGS(PJRT_Client_CreateViewOfDeviceBuffer_Args, args);
    args.client = client_;
    args.device_buffer_ptr = memory;
    args.dims = spec.dims.data();
    args.num_dims = spec.dims.size();
    args.element_type = spec.type;
    args.device = device(core);
    args.on_delete_callback = [](void* region, void* size) {
      UploadMemory::Get().Give(region, reinterpret_cast<size_t>(size));
    };
    args.on_delete_callback_arg = reinterpret_cast<void*>(bytes);
    Status viewed = TakeError(api_, api_->PJRT_Client_CreateViewOfDeviceBuffer(&args));
    if (!viewed.ok()) {
      UploadMemory::Get().Give(memory, bytes);
      return viewed;
    }
    TransferResult result;
    result.buffer = Wrap(args.buffer);
    return std::optional<TransferResult>(std::move(result));
  }

  StatusOr<std::unique_ptr<Executable>> Finish(PJRT_LoadedExecutable* loaded) {
    auto executable = std::make_unique<SimExecutable>(this, loaded);
    PN_RETURN_IF_ERROR(executable->Init());
    return std::unique_ptr<Executable>(std::move(executable));
  }

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::vector<std::vector<std::pair<std::string, PJRT_Memory*>>> memories_;  // [core] -> (kind, memory)
  std::string version_;
  std::string library_name_;
  std::unique_ptr<CompileHelper> helper_;  // null: compiles in this process

  // Once per engine: compiling goes on in this process, without the helper's protection.
  void SayHelperCannotStart(const Status& why) {
    if (said_helper_cannot_start_.exchange(true)) return;
    std::fprintf(stderr,
                 "pjrt-neuron: compiling in this process, where a failed check of XLA's compiler ends the "
                 "program: %s\n",
                 why.message().c_str());
  }
  std::atomic<bool> said_helper_cannot_start_{false};
};

SimBuffer::SimBuffer(SimEngine* engine, PJRT_Buffer* buffer) : engine_(engine), api_(engine->api()), buffer_(buffer) {
  INNER_ARGS(PJRT_Buffer_ElementType_Args, type);
  type.buffer = buffer_;
  if (TakeError(api_, api_->PJRT_Buffer_ElementType(&type)).ok()) type_ = type.type;
  INNER_ARGS(PJRT_Buffer_Dimensions_Args, dims);
  dims.buffer = buffer_;
  if (TakeError(api_, api_->PJRT_Buffer_Dimensions(&dims)).ok()) dims_.assign(dims.dims, dims.dims + dims.num_dims);
}

SimBuffer::SimBuffer(SimEngine* engine, PJRT_Buffer* buffer, std::shared_ptr<OutputTable> outputs, size_t index,
                     int core)
    : engine_(engine),
      api_(engine->api()),
      buffer_(buffer),
      type_(outputs->shapes[index].type),
      core_(core),
      outputs_(std::move(outputs)),
      output_index_(index) {}

int SimBuffer::core() {
  if (core_ < 0) {
    INNER_ARGS(PJRT_Buffer_Device_Args, args);
    args.buffer = buffer_;
    if (TakeError(api_, api_->PJRT_Buffer_Device(&args)).ok()) core_ = engine_->CoreOf(args.device);
  }
  return core_;
}

const std::string& SimBuffer::memory_kind() {
  if (outputs_ && !outputs_->shapes[output_index_].memory_kind.empty()) return outputs_->shapes[output_index_].memory_kind;
  if (memory_kind_.empty()) {
    INNER_ARGS(PJRT_Buffer_Memory_Args, args);
    args.buffer = buffer_;
    memory_kind_ = TakeError(api_, api_->PJRT_Buffer_Memory(&args)).ok() ? engine_->MemoryKind(args.memory) : "device";
  }
  return memory_kind_;
}

StatusOr<std::unique_ptr<Buffer>> SimBuffer::CopyTo(int core, const std::string& memory_kind) {
  INNER_ARGS(PJRT_Buffer_CopyToMemory_Args, args);
  args.buffer = buffer_;
  PN_ASSIGN_OR_RETURN(args.dst_memory, engine_->memory(core, memory_kind));
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_CopyToMemory(&args)));
  return engine_->Wrap(args.dst_buffer);
}

SimExecutable::SimExecutable(SimEngine* engine, PJRT_LoadedExecutable* loaded)
    : engine_(engine), api_(engine->api()), loaded_(loaded) {}

SimExecutable::~SimExecutable() {
  if (executable_ != nullptr) {
    INNER_ARGS(PJRT_Executable_Destroy_Args, args);
    args.executable = executable_;
    TakeError(api_, api_->PJRT_Executable_Destroy(&args));
  }
  INNER_ARGS(PJRT_LoadedExecutable_Destroy_Args, args);
  args.executable = loaded_;
  TakeError(api_, api_->PJRT_LoadedExecutable_Destroy(&args));
}

Status SimExecutable::Init() {
  INNER_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, get);
  get.loaded_executable = loaded_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_GetExecutable(&get)));
  executable_ = get.executable;

  INNER_ARGS(PJRT_Executable_Name_Args, name);
  name.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_Name(&name)));
  name_.assign(name.executable_name, name.executable_name_size);

  INNER_ARGS(PJRT_Executable_NumReplicas_Args, replicas);
  replicas.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_NumReplicas(&replicas)));
  num_replicas_ = static_cast<int>(replicas.num_replicas);
  INNER_ARGS(PJRT_Executable_NumPartitions_Args, partitions);
  partitions.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_NumPartitions(&partitions)));
  num_partitions_ = static_cast<int>(partitions.num_partitions);

  INNER_ARGS(PJRT_Executable_OutputElementTypes_Args, types);
  types.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_OutputElementTypes(&types)));
  INNER_ARGS(PJRT_Executable_OutputDimensions_Args, dims);
  dims.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_OutputDimensions(&dims)));
  INNER_ARGS(PJRT_Executable_OutputMemoryKinds_Args, kinds);
  kinds.executable = executable_;
  Status kinds_status = TakeError(api_, api_->PJRT_Executable_OutputMemoryKinds(&kinds));
  size_t offset = 0;
  std::vector<OutputShape> shapes;
  for (size_t i = 0; i < types.num_output_types; ++i) {
    OutputShape shape;
    shape.type = types.output_types[i];
    size_t rank = i < dims.num_outputs ? dims.dim_sizes[i] : 0;
    shape.dims.assign(dims.dims + offset, dims.dims + offset + rank);
    offset += rank;
    shape.memory_kind = kinds_status.ok() && i < kinds.num_outputs
                            ? std::string(kinds.memory_kinds[i], kinds.memory_kind_sizes[i])
                            : std::string("device");
    shapes.push_back(std::move(shape));
  }
  outputs_ = std::make_shared<OutputTable>(std::move(shapes));

  INNER_ARGS(PJRT_LoadedExecutable_AddressableDevices_Args, devices);
  devices.executable = loaded_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_AddressableDevices(&devices)));
  for (size_t i = 0; i < devices.num_addressable_devices; ++i) {
    addressable_cores_.push_back(engine_->CoreOf(devices.addressable_devices[i]));
  }
  return Status::Ok();
}

// The engine's own transfer manager; its buffers are wrapped as they are retrieved.
class SimTransferManager : public TransferManager {
 public:
  SimTransferManager(SimEngine* engine, PJRT_AsyncHostToDeviceTransferManager* manager, size_t count)
      : engine_(engine), api_(engine->api()), manager_(manager), count_(count) {}
  ~SimTransferManager() override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, args);
    args.transfer_manager = manager_;
    TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_Destroy(&args));
  }
  size_t buffer_count() override { return count_; }
  StatusOr<size_t> BufferSize(int index) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_BufferSize(&args)));
    return args.buffer_size;
  }
  StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    args.data = data;
    args.offset = offset;
    args.transfer_size = size;
    args.is_last_transfer = last;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_TransferData(&args)));
    return WrapEvent(api_, args.done_with_h2d_transfer);
  }
  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&args)));
    return engine_->Wrap(args.buffer_out);
  }
  Status SetBufferError(int index, ErrorCode code, const std::string& message) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    args.error_code = static_cast<PJRT_Error_Code>(code);
    args.error_message = message.data();
    args.error_message_size = message.size();
    return TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_SetBufferError(&args));
  }

 private:
  SimEngine* engine_;
  const PJRT_Api* api_;
  PJRT_AsyncHostToDeviceTransferManager* manager_;
  size_t count_;
};

StatusOr<std::unique_ptr<TransferManager>> SimEngine::CreateTransferManager(int core,
                                                                             const std::vector<ShapeSpec>& shapes,
                                                                             const std::string& memory_kind) {
  std::vector<PJRT_ShapeSpec> specs(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::memset(&specs[i], 0, sizeof(specs[i]));
    specs[i].struct_size = PJRT_ShapeSpec_STRUCT_SIZE;
    specs[i].dims = shapes[i].dims.data();
    specs[i].num_dims = shapes[i].dims.size();
    specs[i].element_type = shapes[i].type;
  }
  INNER_ARGS(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, args);
  args.client = client_;
  args.shape_specs = specs.data();
  args.num_shape_specs = specs.size();
  PN_ASSIGN_OR_RETURN(args.memory, memory(core, memory_kind));
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_CreateBuffersForAsyncHostToDevice(&args)));
  return std::unique_ptr<TransferManager>(new SimTransferManager(this, args.transfer_manager, shapes.size()));
}

SimExecutable* SimExecutable::SingleCoreCopy() {
  std::lock_guard<std::mutex> lock(single_core_mutex_);
  if (single_core_tried_) return static_cast<SimExecutable*>(single_core_.get());
  single_core_tried_ = true;
  auto program = OptimizedProgram();
  if (!program.ok() || !hlo::RunsAlikeOnEveryCore(program->code, program->format)) return nullptr;
  auto bytes = EngineBytes();
  if (!bytes.ok()) return nullptr;
  const std::string options = hlo::PortableSingleCoreOptions(hlo::CompileOptionsOfSerializedExecutable(*bytes));
  if (options.empty()) return nullptr;
  auto copy = engine_->Deserialize(*bytes, &options);
  if (!copy.ok()) return nullptr;
  single_core_ = std::move(copy.value());
  return static_cast<SimExecutable*>(single_core_.get());
}

Status SimExecutable::Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                              ExecuteResult* result) {
  if (only_core >= 0 && num_replicas_ * num_partitions_ > 1 && host_outputs_.empty() &&
      engine_->gates_multi_core_launches()) {
    if (SimExecutable* copy = SingleCoreCopy()) return copy->Execute(args, options, only_core, result);
  }
  const size_t num_devices = args.size();
  const size_t num_args = num_devices == 0 ? 0 : args[0].size();
  const size_t num_outputs = outputs_->shapes.size();
  InlineVector<PJRT_Buffer*, 32> inner_args(num_devices * num_args);
  InlineVector<PJRT_Buffer* const*, 4> arg_lists(num_devices);
  InlineVector<PJRT_Buffer*, 32> inner_outputs(num_devices * num_outputs);
  InlineVector<PJRT_Buffer**, 4> output_lists(num_devices);
  InlineVector<PJRT_Event*, 4> events(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    PJRT_Buffer** row = inner_args.data() + d * num_args;
    for (size_t i = 0; i < num_args; ++i) row[i] = static_cast<SimBuffer*>(args[d][i])->inner();
    arg_lists[d] = row;
    output_lists[d] = inner_outputs.data() + d * num_outputs;
  }

  PJRT_ExecuteOptions inner_options;
  std::memset(&inner_options, 0, sizeof(inner_options));
  inner_options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  inner_options.launch_id = options.launch_id;
  inner_options.non_donatable_input_indices = options.non_donatable_input_indices.data;
  inner_options.num_non_donatable_input_indices = options.non_donatable_input_indices.size;
  inner_options.send_callbacks = options.send_callbacks;
  inner_options.recv_callbacks = options.recv_callbacks;
  inner_options.num_send_ops = options.num_send_ops;
  inner_options.num_recv_ops = options.num_recv_ops;

  INNER_ARGS(PJRT_LoadedExecutable_Execute_Args, exec);
  exec.executable = loaded_;
  exec.options = &inner_options;
  exec.argument_lists = arg_lists.data();
  exec.num_devices = num_devices;
  exec.num_args = num_args;
  exec.output_lists = output_lists.data();
  exec.device_complete_events = events.data();
  exec.execute_device = only_core >= 0 ? engine_->device(only_core) : nullptr;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_Execute(&exec)));

  result->outputs.resize(num_devices);
  result->completions.reserve(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    const int core = only_core >= 0 ? only_core : (d < addressable_cores_.size() ? addressable_cores_[d] : -1);
    auto& outputs = result->outputs[d];
    outputs.reserve(num_outputs);
    for (size_t o = 0; o < num_outputs; ++o) {
      PJRT_Buffer* out = output_lists[d][o];
      outputs.push_back(core >= 0 ? engine_->WrapOutput(out, outputs_, o, core) : engine_->Wrap(out));
      if (o < host_outputs_.size() && host_outputs_[o] && core >= 0) {
        PN_ASSIGN_OR_RETURN(outputs[o], outputs[o]->CopyTo(core, "pinned_host"));
      }
    }
    result->completions.push_back(WrapEvent(api_, events[d]));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Attributes> SimEnginePluginAttributes(const std::string& library_path) {
  PN_ASSIGN_OR_RETURN(const PJRT_Api* api, LoadApi(library_path));
  INNER_ARGS(PJRT_Plugin_Attributes_Args, args);
  PN_RETURN_IF_ERROR(TakeError(api, api->PJRT_Plugin_Attributes(&args)));
  return ToAttributes(args.attributes, args.num_attributes);
}

StatusOr<std::unique_ptr<Engine>> CreateSimEngine(const EngineOptions& options) {
  auto engine = std::make_unique<SimEngine>();
  PN_RETURN_IF_ERROR(engine->Init(options));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace pjrt_neuron::engine
