// Simulated NeuronCores: the XLA CPU PJRT plugin (xla-cpu-pjrt wheel) does the arithmetic,
// one CPU device per NeuronCore. The engine compiles (in the compile helper or here), uploads
// and makes buffers; its buffers, executables and events are objects of their own files.
#include "engine/sim/sim_engine.h"

#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "engine/named_values.h"
#include "engine/sim/compile_helper.h"
#include "engine/sim/cpu_client.h"
#include "engine/sim/engine_library.h"
#include "engine/sim/ffi_handlers.h"
#include "engine/sim/sim_buffer.h"
#include "engine/sim/sim_event.h"
#include "engine/sim/sim_executable.h"
#include "engine/sim/transfer_manager.h"
#include "hlo/compile_options.h"
#include "hlo/hlo_fields.h"
#include "hlo/output_placement.h"

namespace pjrt_neuron::engine {
namespace sim {
namespace {

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

class SimEngine : public Engine {
 public:
  Status Init(const EngineOptions& options) {
    PN_RETURN_IF_ERROR(client_.Init(options));
    api_ = client_.api();
    if (!options.compile_in_process) {
      PN_ASSIGN_OR_RETURN(bool isolate, settings::Flag(settings::Id::kCompileIsolation));
      if (isolate) helper_ = std::make_unique<CompileHelper>(options);
    }
    library_name_ = options.library_path.substr(options.library_path.find_last_of('/') + 1);
    version_ = std::to_string(api_->pjrt_api_version.major_version) + "." +
               std::to_string(api_->pjrt_api_version.minor_version);
    return Status::Ok();
  }

  // The file name tells the engine builds apart (xla_cpu_pjrt.so, pjrt_c_api_cpu_plugin.so).
  std::string description() override { return "XLA CPU (PJRT " + version_ + ", " + library_name_ + ")"; }
  int num_cores() override { return client_.num_cores(); }
  Native<PJRT_Client> NativeClient() override { return {api_, client_.client()}; }

  StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) override {
    PN_ASSIGN_OR_RETURN(std::optional<TransferResult> copied, CopyFromHost(core, spec));
    if (copied.has_value()) return std::move(*copied);
    INNER_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
    args.client = client_.client();
    args.data = spec.data;
    args.type = spec.type;
    args.dims = spec.dims.data();
    args.num_dims = spec.dims.size();
    args.byte_strides = spec.byte_strides;
    args.num_byte_strides = spec.num_byte_strides;
    args.host_buffer_semantics = spec.semantics;
    PN_ASSIGN_OR_RETURN(args.memory, client_.memory(core, spec.memory_kind));
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
    args.client = client_.client();
    args.shape_dims = dims.data();
    args.shape_num_dims = dims.size();
    args.shape_element_type = type;
    args.device = client_.device(core);
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_CreateUninitializedBuffer(&args)));
    return Wrap(args.buffer);
  }

  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) override {
    return CreateSimTransferManager(&client_, core, shapes, memory_kind);
  }

  StatusOr<AliasBuffer> CreateAliasBuffer(int core, const std::string& memory_kind, PJRT_Buffer_Type type,
                                          const std::vector<int64_t>& dims) override {
    INNER_ARGS(PJRT_Client_CreateAliasBuffer_Args, args);
    args.client = client_.client();
    PN_ASSIGN_OR_RETURN(args.memory, client_.memory(core, memory_kind));
    args.shape_dims = dims.data();
    args.shape_num_dims = dims.size();
    args.shape_element_type = type;
    // Newer engine builds need the layout spelled out ("on-device shape has no layout"): the
    // default one, row-major.
    std::vector<int64_t> minor_to_major(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) minor_to_major[i] = int64_t(dims.size() - 1 - i);
    PJRT_Buffer_MemoryLayout layout;
    std::memset(&layout, 0, sizeof(layout));
    layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    layout.tiled.minor_to_major = minor_to_major.data();
    layout.tiled.minor_to_major_size = minor_to_major.size();
    args.shape_layout = &layout;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_CreateAliasBuffer(&args)));
    AliasBuffer alias;
    alias.buffer = Wrap(args.alias_buffer);
    alias.fulfill = args.fulfill_alias_buffer_cb;
    return alias;
  }

  Status FulfillAliasBuffer(void* fulfill, Buffer* target, ErrorCode code, const std::string& message) override {
    INNER_ARGS(PJRT_Client_FulfillAliasBuffer_Args, args);
    args.client = client_.client();
    args.buffer = target != nullptr ? static_cast<SimBuffer*>(target)->inner() : nullptr;
    args.status_code = static_cast<PJRT_Error_Code>(code);
    args.error_message = message.c_str();
    args.error_message_size = message.size();
    args.fulfill_alias_buffer_cb = static_cast<PJRT_FulfillAliasBufferCallback*>(fulfill);
    return TakeError(api_, api_->PJRT_Client_FulfillAliasBuffer(&args));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    // A registered FFI handler's code is in this process only, out of the helper's reach.
    if (helper_ != nullptr && !helper_->cannot_start() && !HasFfiHandlers()) {
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
        !client_.runs_ffi_handlers()) {
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
    args.client = client_.client();
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
    auto executable = std::make_unique<SimExecutable>(&client_, loaded);
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
    return SimExecutable::Deserialize(&client_, bytes, overridden_options);
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
    args.client = client_.client();
    args.num_replicas = num_replicas;
    args.num_partitions = num_partitions;
    args.default_assignment_size = assignment.size();
    args.default_assignment = assignment.data();
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Client_DefaultDeviceAssignment(&args)));
    return assignment;
  }

 private:
  std::unique_ptr<Buffer> Wrap(PJRT_Buffer* buffer) { return std::make_unique<SimBuffer>(&client_, buffer); }

  // Large dense uploads to device memory: copied here into UploadMemory and handed to
  // the engine as a view that gives the memory back when the buffer goes; nothing (no value)
  // when the engine should do it.
  StatusOr<std::optional<TransferResult>> CopyFromHost(int core, const HostBufferSpec& spec) {
    const size_t element_size = OwnCopyElementBytes(spec.type);
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
    args.client = client_.client();
    args.device_buffer_ptr = memory;
    args.dims = spec.dims.data();
    args.num_dims = spec.dims.size();
    args.element_type = spec.type;
    args.device = client_.device(core);
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
    auto executable = std::make_unique<SimExecutable>(&client_, loaded);
    PN_RETURN_IF_ERROR(executable->Init());
    return std::unique_ptr<Executable>(std::move(executable));
  }

  std::unique_ptr<CompileHelper> helper_;  // null: compiles in this process
  CpuClient client_;  // after helper_: destroyed before it
  const PJRT_Api* api_ = nullptr;
  std::string version_;
  std::string library_name_;

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

}  // namespace
}  // namespace sim

StatusOr<Attributes> SimEnginePluginAttributes(const std::string& library_path) {
  PN_ASSIGN_OR_RETURN(const PJRT_Api* api, sim::LoadApi(library_path));
  INNER_ARGS(PJRT_Plugin_Attributes_Args, args);
  PN_RETURN_IF_ERROR(sim::TakeError(api, api->PJRT_Plugin_Attributes(&args)));
  return AttributesOf(args.attributes, args.num_attributes);
}

StatusOr<std::unique_ptr<Engine>> CreateSimEngine(const EngineOptions& options) {
  auto engine = std::make_unique<sim::SimEngine>();
  PN_RETURN_IF_ERROR(engine->Init(options));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace pjrt_neuron::engine
