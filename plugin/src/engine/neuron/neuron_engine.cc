// The Neuron engine (neuron_engine.h): compiles through neuronx-cc, holds the runtime session,
// makes buffers on the cores.
#include "engine/neuron/neuron_engine.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "engine/neuron/arrays.h"
#include "engine/neuron/mlir_to_hlo.h"
#include "engine/neuron/neff_program.h"
#include "engine/neuron/neuron_buffer.h"
#include "engine/neuron/neuron_executable.h"
#include "engine/neuron/neuron_settings.h"
#include "engine/neuron/neuronx_cc.h"
#include "engine/neuron/placement.h"
#include "engine/neuron/runtime.h"
#include "engine/neuron/subprocess.h"
#include "engine/neuron/transfer_manager.h"
#include "hlo/hlo_fields.h"
#include "hlo/neff_names.h"
#include "hlo/partitions_as_replicas.h"

namespace pjrt_neuron::engine {
namespace {

using namespace neuron;  // NOLINT: this file is the neuron layer's front

// Collectives of one process's cores need a root address; a free local port serves.
void ChooseRootCommId() {
  const char* set = std::getenv("NEURON_RT_ROOT_COMM_ID");
  if (set != nullptr && *set != '\0') return;
  auto port = FreeTcpPort();
  if (!port.ok()) return;
  const std::string value = "127.0.0.1:" + std::to_string(port.value());
  setenv("NEURON_RT_ROOT_COMM_ID", value.c_str(), 0);
}

class NeuronEngine : public Engine {
 public:
  ~NeuronEngine() override {
    if (runtime_ != nullptr) runtime_->EndUse();  // the last use unloads, frees, then nrt_close
  }

  Status Init(const EngineOptions& options, bool compile_only, SpmdPartitioner partitioner) {
    num_cores_ = options.num_cores;
    first_core_ = options.first_core;
    job_cores_ = options.job_cores;
    partitioner_ = std::move(partitioner);
    PN_ASSIGN_OR_RETURN(NeuronSettings settings, ReadNeuronSettings());
    compiler_.path = FindExecutable(settings.neuronx_cc);
    if (compiler_.path.empty()) {
      return FailedPrecondition("the Neuron engine needs neuronx-cc: '" + settings.neuronx_cc +
                                "' was not found (PATH, or set PJRT_NEURON_NEURONX_CC)");
    }
    PN_ASSIGN_OR_RETURN(compiler_.version, CompilerVersion(compiler_.path));
    if (!compile_only) {
      if (num_cores_ > 1 && job_cores_.empty()) ChooseRootCommId();  // read by nrt_init
      PN_ASSIGN_OR_RETURN(runtime_, Runtime::Open(settings.nrt_library, first_core_));
      if (runtime_->visible_cores() < num_cores_) {
        return FailedPrecondition("the Neuron runtime (" + settings.nrt_library + ") sees " +
                                  std::to_string(runtime_->visible_cores()) + " NeuronCore(s), the client needs " +
                                  std::to_string(num_cores_) + " (NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES)");
      }
    }
    compiler_.target = TargetFor(runtime_ != nullptr ? runtime_->instance_family() : 0, settings.instance_type);
    if (compiler_.target.empty()) compiler_.target = "trn1";
    compiler_.lnc = settings.lnc != 0 ? settings.lnc : DefaultLnc(compiler_.target);
    compiler_.extra_flags = settings.cc_flags;
    compiler_.progress_after_seconds = settings.progress_after_seconds;
    made_by_ = "neuronx-cc " + compiler_.version + " --target=" + compiler_.target + " --lnc " +
               std::to_string(compiler_.lnc);
    return Status::Ok();
  }

  // Goes into the compile cache's key: a new compiler, target or LNC makes new entries.
  std::string description() override { return "Neuron runtime + " + made_by_; }
  int num_cores() override { return num_cores_; }
  bool simulated() const override { return false; }

  StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) override {
    PN_RETURN_IF_ERROR(CheckCore(core));
    PN_RETURN_IF_ERROR(CheckDenseLayout(spec.device_layout, spec.dims.size(), "a device layout"));
    const size_t element = ElementBytes(spec.type);
    if (element == 0) return Unimplemented("element type " + TypeName(spec.type) + " cannot be stored on a NeuronCore");
    PN_ASSIGN_OR_RETURN(size_t bytes, DenseBytes(spec.type, spec.dims));
    if (bytes > 0 && spec.data == nullptr) return InvalidArgument("the host data is null");
    const void* dense = spec.data;
    std::vector<char> gathered;
    if (!IsDenseStrides(spec.byte_strides, spec.num_byte_strides, spec.dims, element)) {
      if (spec.num_byte_strides != spec.dims.size()) {
        return InvalidArgument(std::to_string(spec.num_byte_strides) + " byte strides for " +
                               std::to_string(spec.dims.size()) + " dimensions");
      }
      gathered.resize(bytes);
      GatherStrided(spec.data, spec.dims, spec.byte_strides, element, gathered.data());
      dense = gathered.data();
    }
    TransferResult result;
    PN_ASSIGN_OR_RETURN(result.buffer, MakeBuffer(runtime_, core, spec.memory_kind, spec.type, spec.dims, dense,
                                                  "a transfer from the host"));
    return result;  // written before returning: the host buffer is free at once
  }

  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims) override {
    PN_RETURN_IF_ERROR(CheckCore(core));
    PN_ASSIGN_OR_RETURN(std::unique_ptr<NeuronBuffer> buffer,
                        MakeBuffer(runtime_, core, "device", type, dims, nullptr, "an uninitialized buffer"));
    return std::unique_ptr<Buffer>(std::move(buffer));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    PN_ASSIGN_OR_RETURN(Placement placement, ReadPlacement(options));
    PN_ASSIGN_OR_RETURN(std::vector<int> cores, CoresOf(placement));
    std::string module;
    if (placement.num_partitions > 1) {
      PN_ASSIGN_OR_RETURN(module, PartitionedModule(program, options, placement));
    } else {
      PN_ASSIGN_OR_RETURN(module, HloModuleOf(program));
    }
    PN_ASSIGN_OR_RETURN(hlo::NeffNamedModule named, hlo::WithNeffNames(module));
    NeffProgram compiled;
    compiled.name = named.signature.module_name.empty() ? "program" : named.signature.module_name;
    compiled.num_replicas = placement.num_replicas;
    compiled.num_partitions = placement.num_partitions;
    compiled.cores = std::move(cores);
    compiled.signature = std::move(named.signature);
    PN_ASSIGN_OR_RETURN(compiled.neff, CompileToNeff(compiler_, named.module, compiled.name));
    compiled.hlo_module = std::move(named.module);
    compiled.made_by = made_by_;
    return Finish(std::move(compiled));
  }

  StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                    const std::string* overridden_options) override {
    PN_ASSIGN_OR_RETURN(NeffProgram program, DeserializeNeffProgram(bytes));
    if (overridden_options != nullptr) {
      PN_ASSIGN_OR_RETURN(Placement placement, ReadPlacement(*overridden_options));
      if (placement.num_replicas != program.num_replicas || placement.num_partitions != program.num_partitions) {
        return InvalidArgument("the options ask for " + std::to_string(placement.num_replicas) +
                               " replicas, the NEFF was compiled for " + std::to_string(program.num_replicas));
      }
      PN_ASSIGN_OR_RETURN(program.cores, CoresOf(placement));
    }
    for (int core : program.cores) PN_RETURN_IF_ERROR(CheckProgramCore(core));
    return Finish(std::move(program));
  }

  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) override {
    const int64_t needed = static_cast<int64_t>(num_replicas) * num_partitions;
    // This process's cores when they suffice, else the job's.
    const int64_t available = needed <= num_cores_ || job_cores_.empty() ? num_cores_ : job_cores_.size();
    if (num_replicas < 1 || num_partitions < 1 || needed > available) {
      return InvalidArgument(std::to_string(num_replicas) + " replicas x " + std::to_string(num_partitions) +
                             " partitions do not fit on " + std::to_string(available) + " NeuronCores");
    }
    std::vector<int> assignment(static_cast<size_t>(needed));
    for (int64_t i = 0; i < needed; ++i) {
      assignment[i] = needed <= num_cores_ ? first_core_ + static_cast<int>(i) : job_cores_[i];
    }
    return assignment;
  }

  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) override {
    PN_RETURN_IF_ERROR(CheckCore(core));
    return CreateNeuronTransferManager(runtime_, core, shapes, memory_kind);
  }

  StatusOr<CoreMemoryStats> CoreMemory(int core) override {
    PN_RETURN_IF_ERROR(CheckCore(core));
    if (runtime_ == nullptr) return Unimplemented("a compile-only Neuron engine has no runtime session");
    PN_ASSIGN_OR_RETURN(neuron::CoreMemory memory, runtime_->MemoryStats(core));
    return CoreMemoryStats{memory.bytes_used, memory.bytes_limit};
  }

 private:
  bool IsLocal(int core) const { return core >= first_core_ && core < first_core_ + num_cores_; }

  Status CheckCore(int core) const {
    if (!IsLocal(core)) {
      return InvalidArgument("NeuronCore " + std::to_string(core) + " is not one of this " +
                             (job_cores_.empty() ? "engine's " + std::to_string(num_cores_)
                                                 : "process's " + std::to_string(first_core_) + ".." +
                                                       std::to_string(first_core_ + num_cores_ - 1)));
    }
    return Status::Ok();
  }

  // A program may also run on the cores of the job's other processes, as ranks of its communicator.
  Status CheckProgramCore(int core) const {
    if (std::find(job_cores_.begin(), job_cores_.end(), core) != job_cores_.end()) return Status::Ok();
    return CheckCore(core);
  }

  std::vector<int> LocalCores() const {
    std::vector<int> cores;
    for (int c = first_core_; c < first_core_ + num_cores_; ++c) cores.push_back(c);
    return cores;
  }

  StatusOr<std::vector<int>> CoresOf(const Placement& placement) const {
    std::vector<int> cores = placement.cores;
    if (cores.empty()) {
      const int count = placement.num_replicas * placement.num_partitions;
      const int first = count == 1 && placement.device_ordinal >= 0 ? placement.device_ordinal : first_core_;
      for (int r = 0; r < count; ++r) cores.push_back(first + r);
    }
    for (int core : cores) PN_RETURN_IF_ERROR(CheckProgramCore(core));
    for (size_t i = 0; i < cores.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (cores[i] == cores[j]) {
          return InvalidArgument("the device assignment puts two replicas on NeuronCore " + std::to_string(cores[i]));
        }
      }
    }
    return cores;
  }

  // One program for every core, each partition a rank: XLA's partitioner splits the program,
  // then its partitions are restated as the replicas the Neuron runtime's ranks are.
  StatusOr<std::string> PartitionedModule(const Program& program, const std::string& options,
                                          const Placement& placement) {
    if (placement.num_replicas > 1) {
      return Unimplemented("programs of several replicas and several partitions (" +
                           std::to_string(placement.num_replicas) + " x " + std::to_string(placement.num_partitions) +
                           ") are not implemented on the Neuron engine; one of either is");
    }
    if (!placement.spmd) {  // already what each partition runs
      PN_ASSIGN_OR_RETURN(std::string module, HloModuleOf(program));
      return hlo::PartitionsAsReplicas(module);
    }
    if (!partitioner_) return Unimplemented("the Neuron engine was built without an SPMD partitioner");
    auto partitioned = partitioner_(program, options);
    if (!partitioned.ok()) {
      return Status(partitioned.status().code(),
                    "XLA's SPMD partitioner (the CPU engine's) failed: " + partitioned.status().message());
    }
    return hlo::PartitionsAsReplicas(partitioned.value());
  }

  StatusOr<std::string> HloModuleOf(const Program& program) {
    const std::string code(program.code, program.code_size);
    if (program.format == "hlo") return code;
    if (program.format == "hlo_with_config") {
      std::string module = hlo::HloModuleBytes(code, true);
      if (module.empty()) return InvalidArgument("the hlo_with_config program holds no HLO module");
      return module;
    }
    if (program.format != "mlir") return InvalidArgument("unknown program format '" + program.format + "'");
    std::lock_guard<std::mutex> lock(converter_mutex_);
    if (!converter_.has_value()) {
      PN_ASSIGN_OR_RETURN(MlirConverter converter, DefaultMlirConverter());
      converter_ = std::move(converter);
    }
    const MlirConverter converter = *converter_;
    return ConvertMlirToHlo(converter, code);
  }

  StatusOr<std::unique_ptr<Executable>> Finish(NeffProgram program) {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<NeuronExecutable> executable,
                        NeuronExecutable::Create(runtime_, std::move(program), LocalCores()));
    return std::unique_ptr<Executable>(std::move(executable));
  }

  int num_cores_ = 0;
  int first_core_ = 0;
  std::vector<int> job_cores_;  // empty: not part of a multi-process job
  std::shared_ptr<Runtime> runtime_;  // null: compile only
  SpmdPartitioner partitioner_;
  CompilerConfig compiler_;
  std::string made_by_;
  std::mutex converter_mutex_;
  std::optional<MlirConverter> converter_;
};

NeuronAvailability Probe() {
  NeuronAvailability result;
  if (std::string taken = NrtLibrary::DefaultNameTakenByExplicitPath(); !taken.empty()) {
    result.why_not = std::string(kDefaultNrtLibrary) + " in this process is " + taken +
                     ", which a setting (PJRT_NEURON_NRT_LIBRARY) chose";
    return result;
  }
  auto library = NrtLibrary::Open(kDefaultNrtLibrary);
  if (!library.ok()) {
    result.why_not = library.status().message();
    return result;
  }
  uint32_t visible = 0;
  NrtStatus s = library.value()->api().get_visible_vnc_count(&visible);
  if (s != 0 || visible == 0) {
    result.why_not = std::string(kDefaultNrtLibrary) + " sees no NeuronCore (nrt_get_visible_vnc_count: status " +
                     std::to_string(s) + ", " + std::to_string(visible) + " cores)";
    return result;
  }
  const std::string compiler = FindExecutable("neuronx-cc");
  if (compiler.empty()) {
    result.why_not = "neuronx-cc is not on PATH";
    return result;
  }
  auto version = CompilerVersion(compiler);
  if (!version.ok()) {
    result.why_not = version.status().message();
    return result;
  }
  result.available = true;
  return result;
}

std::string FamilyName(uint32_t family) {
  const std::string target = TargetFor(family, "");
  return target.empty() ? "unknown (" + std::to_string(family) + ")" : target;
}

}  // namespace

Attributes DescribeNeuronRuntime(bool with_memory) {
  Attributes out;
  auto settings = ReadNeuronSettings();
  if (!settings.ok()) {
    out.push_back({"settings_error", settings.status().message()});
    return out;
  }
  out.push_back({"neuron_library", settings->nrt_library});
  auto library = NrtLibrary::Open(settings->nrt_library);
  if (!library.ok()) {
    out.push_back({"runtime_error", library.status().message()});
  } else {
    const NrtApi& api = library.value()->api();
    if (api.get_version == nullptr) {
      out.push_back({"runtime_version_error", std::string("the library has no nrt_get_version")});
    } else {
      NrtVersion version{};
      NrtStatus s = api.get_version(&version, sizeof version);
      if (s != 0) {
        out.push_back({"runtime_version_error", "nrt_get_version: status " + std::to_string(s)});
      } else {
        version.detail[sizeof version.detail - 1] = '\0';
        version.git_hash[sizeof version.git_hash - 1] = '\0';
        std::string text = std::to_string(version.major) + "." + std::to_string(version.minor) + "." +
                           std::to_string(version.patch) + "." + std::to_string(version.maintenance);
        if (version.detail[0] != '\0') text += " (" + std::string(version.detail) + ")";
        if (version.git_hash[0] != '\0') text += " git " + std::string(version.git_hash);
        out.push_back({"runtime_version", text});
      }
    }
    if (api.get_instance_info != nullptr) {
      NrtInstanceInfo info{};
      NrtStatus s = api.get_instance_info(&info, sizeof info);
      if (s == 0) {
        out.push_back({"instance_family", FamilyName(info.family)});
        out.push_back({"instance_size_code", static_cast<int64_t>(info.size)});
      } else {
        out.push_back({"instance_error", "nrt_get_instance_info: status " + std::to_string(s)});
      }
    }
    uint32_t count = 0;
    if (api.get_total_vnc_count != nullptr && api.get_total_vnc_count(&count) == 0) {
      out.push_back({"total_cores", static_cast<int64_t>(count)});
    }
    count = 0;
    NrtStatus s = api.get_visible_vnc_count(&count);
    if (s == 0) {
      out.push_back({"visible_cores", static_cast<int64_t>(count)});
    } else {
      out.push_back({"visible_cores_error", "nrt_get_visible_vnc_count: status " + std::to_string(s)});
    }
    if (with_memory) {
      auto runtime = Runtime::Open(settings->nrt_library);
      if (!runtime.ok()) {
        out.push_back({"hbm_error", runtime.status().message()});
      } else {
        std::vector<int64_t> hbm;
        Status failed = Status::Ok();
        for (int core = 0; core < runtime.value()->visible_cores() && failed.ok(); ++core) {
          auto memory = runtime.value()->MemoryStats(core);
          if (memory.ok()) {
            hbm.push_back(memory->bytes_limit);
          } else {
            failed = memory.status();
          }
        }
        runtime.value()->EndUse();
        if (failed.ok()) {
          out.push_back({"hbm_bytes_per_core", hbm});
        } else {
          out.push_back({"hbm_error", failed.message()});
        }
      }
    }
  }
  out.push_back({"neuronx_cc", settings->neuronx_cc});
  const std::string compiler = FindExecutable(settings->neuronx_cc);
  if (compiler.empty()) {
    out.push_back({"compiler_error", "'" + settings->neuronx_cc + "' was not found (PATH, or PJRT_NEURON_NEURONX_CC)"});
  } else {
    auto version = CompilerVersion(compiler);
    if (version.ok()) {
      out.push_back({"compiler_version", version.value()});
    } else {
      out.push_back({"compiler_error", version.status().message()});
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Engine>> CreateNeuronEngine(const EngineOptions& options, bool compile_only,
                                                     SpmdPartitioner partitioner) {
  auto engine = std::make_unique<NeuronEngine>();
  PN_RETURN_IF_ERROR(engine->Init(options, compile_only, std::move(partitioner)));
  return std::unique_ptr<Engine>(std::move(engine));
}

const NeuronAvailability& DefaultNeuronAvailability() {
  static std::mutex mutex;
  static std::optional<NeuronAvailability> checked;
  std::lock_guard<std::mutex> lock(mutex);
  if (!checked.has_value()) checked = Probe();
  return *checked;
}

void CancelNeuronCompilations() { CancelSubprocesses(); }

StatusOr<int> FreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  const int error = errno;
  close(fd);
  if (port < 0) return Internal(std::string("no free TCP port: ") + std::strerror(error));
  return port;
}

}  // namespace pjrt_neuron::engine
