// Loading and running NEFFs (neuron_executable.h). Executions are synchronous: the outputs are
// complete when Execute returns.
#include "engine/neuron/neuron_executable.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/sha256.h"
#include "engine/neuron/arrays.h"
#include "engine/neuron/neuron_buffer.h"
#include "engine/neuron/nrt_status.h"
#include "engine/neuron/placement.h"
#include "hlo/hlo_fields.h"

namespace pjrt_neuron::engine::neuron {
namespace {

constexpr NrtStatus kCompletedWithNumericErrors = 1003;

// Runs `work(i)` for i in [0, n) at once, one thread each but the last; the ranks of a
// collective wait for each other inside the runtime, so they must not run one after another.
template <typename Work>
void RunTogether(size_t n, Work work) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i + 1 < n; ++i) threads.emplace_back([&work, i] { work(i); });
  if (n > 0) work(n - 1);
  for (std::thread& t : threads) t.join();
}

StatusOr<std::vector<NeffTensor>> TensorInfo(const Runtime& runtime, const LoadedModel& model) {
  NrtTensorInfoArray* info = nullptr;
  NrtStatus s = runtime.api().get_model_tensor_info(model.get(), &info);
  if (s != 0 || info == nullptr) return runtime.Error("nrt_get_model_tensor_info", s == 0 ? 1 : s, model.vnc(), "");
  std::vector<NeffTensor> tensors;
  for (uint64_t i = 0; i < TensorCount(*info); ++i) {
    const NrtTensorInfo& t = TensorAt(*info, i);
    tensors.push_back({std::string(t.name, strnlen(t.name, kNrtTensorNameMax)), t.usage, t.size});
  }
  runtime.api().free_model_tensor_info(info);
  return tensors;
}

// A fresh tensor with `source`'s bytes, on its core: an aliased input that must not be donated.
StatusOr<std::shared_ptr<DeviceTensor>> CopyOf(Runtime& runtime, const DeviceTensor& source, const std::string& why) {
  PN_ASSIGN_OR_RETURN(auto copy, runtime.Allocate(source.vnc(), source.size(), why));
  if (runtime.api().tensor_copy != nullptr) {
    std::lock_guard<std::mutex> lock(runtime.core_lock(source.vnc()));
    NrtStatus s = runtime.api().tensor_copy(source.get(), 0, copy->get(), 0, source.size());
    if (s == 0) return copy;
  }
  std::vector<char> staging(source.size());
  PN_RETURN_IF_ERROR(source.Read(staging.data(), 0, staging.size()));
  PN_RETURN_IF_ERROR(copy->Write(staging.data(), 0, staging.size()));
  return copy;
}

}  // namespace

struct NeuronExecutable::Run {
  int core = -1;
  std::shared_ptr<CoreModel> model;
  std::vector<std::shared_ptr<DeviceTensor>> keep;     // every tensor the sets refer to
  std::vector<std::shared_ptr<DeviceTensor>> outputs;  // per result; null for zero bytes
  std::vector<NeuronBuffer*> donated;                  // inputs that are gone once it ran
  std::unique_ptr<TensorSet> inputs;
  std::unique_ptr<TensorSet> results;
  Status status;
};

NeuronExecutable::NeuronExecutable(std::shared_ptr<Runtime> runtime, NeffProgram program, std::vector<int> local_cores)
    : runtime_(std::move(runtime)), program_(std::move(program)), local_cores_(std::move(local_cores)) {}

StatusOr<std::unique_ptr<NeuronExecutable>> NeuronExecutable::Create(std::shared_ptr<Runtime> runtime,
                                                                     NeffProgram program, std::vector<int> local_cores) {
  std::unique_ptr<NeuronExecutable> executable(
      new NeuronExecutable(std::move(runtime), std::move(program), std::move(local_cores)));
  PN_RETURN_IF_ERROR(executable->Init());
  return executable;
}

Status NeuronExecutable::Init() {
  const hlo::EntrySignature& signature = program_.signature;
  for (const hlo::ArraySignature& p : signature.parameters) {
    PN_ASSIGN_OR_RETURN(PJRT_Buffer_Type type, FromXlaType(p.element_type));
    PN_ASSIGN_OR_RETURN(size_t bytes, DenseBytes(type, p.dims));
    parameter_bytes_.push_back(bytes);
    memory_stats_.argument_size_in_bytes += static_cast<int64_t>(bytes);
  }
  for (const hlo::ArraySignature& o : signature.outputs) {
    PN_ASSIGN_OR_RETURN(PJRT_Buffer_Type type, FromXlaType(o.element_type));
    PN_ASSIGN_OR_RETURN(size_t bytes, DenseBytes(type, o.dims));
    outputs_.push_back({type, o.dims, "device"});
    output_bytes_.push_back(bytes);
    memory_stats_.output_size_in_bytes += static_cast<int64_t>(bytes);
  }
  donated_.assign(signature.parameters.size(), false);
  for (const hlo::OutputAlias& alias : signature.aliases) {
    donated_[alias.parameter] = true;
    memory_stats_.alias_size_in_bytes += static_cast<int64_t>(output_bytes_[alias.output]);
  }
  ranks_ = program_.cores.size() > 1 && NeedsRanks(program_.hlo_module);
  memory_stats_.generated_code_size_in_bytes = static_cast<int64_t>(program_.neff.size());
  memory_stats_.peak_memory_in_bytes = memory_stats_.argument_size_in_bytes + memory_stats_.output_size_in_bytes -
                                       memory_stats_.alias_size_in_bytes;
  return Status::Ok();
}

bool NeuronExecutable::IsLocal(int core) const {
  return std::find(local_cores_.begin(), local_cores_.end(), core) != local_cores_.end();
}

std::vector<int> NeuronExecutable::addressable_cores() {
  std::vector<int> cores;
  for (int core : program_.cores) {
    if (IsLocal(core)) cores.push_back(core);
  }
  return cores;
}

StatusOr<std::shared_ptr<NeuronExecutable::CoreModel>> NeuronExecutable::LoadOn(int core, int rank, int world) {
  auto loaded = std::make_shared<CoreModel>();
  PN_ASSIGN_OR_RETURN(loaded->model, runtime_->Load(program_.neff, core, rank, world, "'" + program_.name + "'"));
  PN_ASSIGN_OR_RETURN(std::vector<NeffTensor> tensors, TensorInfo(*runtime_, *loaded->model));
  PN_ASSIGN_OR_RETURN(loaded->binding,
                      BindTensors(program_.signature, parameter_bytes_, output_bytes_, tensors, program_.name));
  return loaded;
}

// The ranks of one communicator on this process's cores, one model per core, loaded together;
// a rank's number is its place in the device assignment, the same in every process of a job.
Status NeuronExecutable::LoadRanks() {
  const size_t world = program_.cores.size();
  std::vector<size_t> ranks;
  for (size_t r = 0; r < world; ++r) {
    if (IsLocal(program_.cores[r])) ranks.push_back(r);
  }
  std::vector<StatusOr<std::shared_ptr<CoreModel>>> loaded(ranks.size(), Status::Ok());
  RunTogether(ranks.size(), [&](size_t i) {
    loaded[i] = LoadOn(program_.cores[ranks[i]], static_cast<int>(ranks[i]), static_cast<int>(world));
  });
  for (const auto& model : loaded) PN_RETURN_IF_ERROR(model.status());
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < ranks.size(); ++i) models_[program_.cores[ranks[i]]] = std::move(loaded[i].value());
  return Status::Ok();
}

// Models are loaded at the first run on a core, not at compile: a load that fails then (a core
// out of HBM, say) leaves the compiled NEFF in the compile cache. A program whose replicas do
// not meet may run on any one core (execute_device).
StatusOr<std::shared_ptr<NeuronExecutable::CoreModel>> NeuronExecutable::ModelOn(int core) {
  auto find = [&]() -> std::shared_ptr<CoreModel> {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = models_.find(core);
    return found != models_.end() ? found->second : nullptr;
  };
  if (IsDeleted()) return FailedPrecondition("the executable '" + program_.name + "' has been deleted");
  if (auto model = find()) return model;
  std::lock_guard<std::mutex> loading(load_mutex_);  // one load per core, however many callers
  if (auto model = find()) return model;
  if (!ranks_) {
    PN_ASSIGN_OR_RETURN(auto loaded, LoadOn(core, 0, 1));
    std::lock_guard<std::mutex> lock(mutex_);
    return models_.emplace(core, std::move(loaded)).first->second;
  }
  if (std::find(program_.cores.begin(), program_.cores.end(), core) != program_.cores.end()) {
    PN_RETURN_IF_ERROR(LoadRanks());
    if (auto model = find()) return model;
  }
  return InvalidArgument("'" + program_.name + "' runs on " + std::to_string(program_.cores.size()) +
                         " NeuronCores as one collective program; it cannot run on NeuronCore " +
                         std::to_string(core) + " alone");
}

Status NeuronExecutable::Prepare(const CoreModel& model, int core, const ArgumentRow& args,
                                 const ExecuteOptions& options, Run* run) {
  const hlo::EntrySignature& signature = program_.signature;
  const TensorBinding& binding = model.binding;
  if (args.size() != signature.parameters.size()) {
    return InvalidArgument("'" + program_.name + "' takes " + std::to_string(signature.parameters.size()) +
                           " arguments, " + std::to_string(args.size()) + " were given");
  }
  run->inputs = std::make_unique<TensorSet>(runtime_);
  run->results = std::make_unique<TensorSet>(runtime_);
  PN_RETURN_IF_ERROR(run->inputs->Init(core));
  PN_RETURN_IF_ERROR(run->results->Init(core));
  run->outputs.assign(signature.outputs.size(), nullptr);
  std::vector<std::shared_ptr<DeviceTensor>> input_tensors(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    auto* buffer = static_cast<NeuronBuffer*>(args[i]);
    const std::string which = "argument " + std::to_string(i) + " of '" + program_.name + "'";
    if (buffer->core() != core) {
      return InvalidArgument(which + " is on NeuronCore " + std::to_string(buffer->core()) + ", the run on " +
                             std::to_string(core));
    }
    PN_ASSIGN_OR_RETURN(PJRT_Buffer_Type expected, FromXlaType(signature.parameters[i].element_type));
    if (buffer->element_type() != expected || buffer->dims() != signature.parameters[i].dims) {
      return InvalidArgument(which + " is " + ShapeText(buffer->element_type(), buffer->dims()) + ", the program takes " +
                             ShapeText(expected, signature.parameters[i].dims));
    }
    PN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceTensor> tensor, buffer->TensorForExecution());
    const bool staged = tensor == nullptr && parameter_bytes_[i] > 0;
    if (staged) {  // in pinned_host memory: a copy on the core
      PN_ASSIGN_OR_RETURN(std::vector<char> host, buffer->HostBytes());
      PN_ASSIGN_OR_RETURN(tensor, runtime_->Allocate(core, parameter_bytes_[i], which + " (from host memory)"));
      PN_RETURN_IF_ERROR(tensor->Write(host.data(), 0, host.size()));
    }
    const bool listed_once = std::count(args.begin(), args.end(), args[i]) == 1;
    const bool may_donate = donated_[i] && buffer->memory_kind() == "device" && listed_once &&
                            std::find(options.non_donatable_input_indices.begin(),
                                      options.non_donatable_input_indices.end(),
                                      static_cast<int64_t>(i)) == options.non_donatable_input_indices.end();
    const auto aliased = std::find(binding.output_alias.begin(), binding.output_alias.end(), static_cast<int>(i));
    if (aliased != binding.output_alias.end() && tensor != nullptr) {
      // The NEFF writes this result into the input's tensor: a kept input gets a copy to lose.
      if (!may_donate && !staged) {
        PN_ASSIGN_OR_RETURN(tensor, CopyOf(*runtime_, *tensor, which + " (kept, not donated)"));
      }
      run->outputs[aliased - binding.output_alias.begin()] = tensor;
    }
    if (may_donate) run->donated.push_back(buffer);
    input_tensors[i] = tensor;
    if (!binding.input_names[i].empty() && tensor != nullptr) {
      PN_RETURN_IF_ERROR(run->inputs->Add(binding.input_names[i], *tensor, core));
      run->keep.push_back(tensor);
    }
  }
  for (size_t k = 0; k < run->outputs.size(); ++k) {
    if (output_bytes_[k] == 0 || binding.output_names[k].empty()) continue;
    if (run->outputs[k] == nullptr) {
      PN_ASSIGN_OR_RETURN(run->outputs[k],
                          runtime_->Allocate(core, output_bytes_[k],
                                             "result " + std::to_string(k) + " of '" + program_.name + "'"));
    }
    PN_RETURN_IF_ERROR(run->results->Add(binding.output_names[k], *run->outputs[k], core));
  }
  return Status::Ok();
}

Status NeuronExecutable::Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                                ExecuteResult* result) {
  if (runtime_ == nullptr) {
    return FailedPrecondition("'" + program_.name + "' was compiled for a topology and is not loaded; load it first");
  }
  const std::vector<int> cores = only_core >= 0 ? std::vector<int>{only_core} : addressable_cores();
  if (args.size() != cores.size()) {
    return InvalidArgument("'" + program_.name + "' runs on " + std::to_string(cores.size()) + " NeuronCore(s), " +
                           std::to_string(args.size()) + " argument lists were given");
  }
  std::vector<Run> runs(cores.size());
  for (size_t d = 0; d < cores.size(); ++d) {
    runs[d].core = cores[d];
    PN_ASSIGN_OR_RETURN(runs[d].model, ModelOn(cores[d]));
    PN_RETURN_IF_ERROR(Prepare(*runs[d].model, cores[d], args[d], options, &runs[d]));
  }
  {
    // Every core of the run at once, in one order, so two collective runs cannot deadlock.
    std::vector<int> sorted = cores;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    for (int core : sorted) locks.emplace_back(runtime_->core_lock(core));
    RunTogether(runs.size(), [&](size_t d) {
      Run& run = runs[d];
      NrtStatus s = runtime_->api().execute(run.model->model->get(), run.inputs->get(), run.results->get());
      if (!ExecutionSucceeded(s)) {
        run.status = runtime_->Error("nrt_execute", s, run.core, "running '" + program_.name + "'");
      } else if (s == kCompletedWithNumericErrors) {
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) {
          std::fprintf(stderr, "pjrt-neuron: '%s' produced NaN or Inf on NeuronCore %d "
                               "(NRT_EXEC_COMPLETED_WITH_NUM_ERR, 1003); said once per process\n",
                       program_.name.c_str(), run.core);
        }
      }
    });
  }
  for (const Run& run : runs) {
    if (!run.status.ok()) return run.status;  // inputs stay: nothing was donated
  }
  for (Run& run : runs) {
    for (NeuronBuffer* donated : run.donated) donated->MarkDonated();
    OutputList<std::unique_ptr<Buffer>> outputs;
    for (size_t k = 0; k < outputs_.size(); ++k) {
      outputs.push_back(std::make_unique<NeuronBuffer>(runtime_, run.core, "device", outputs_[k].type, outputs_[k].dims,
                                                       output_bytes_[k], run.outputs[k], std::vector<char>()));
    }
    result->outputs.push_back(std::move(outputs));
    result->completions.push_back(std::make_shared<CompletedEvent>());
  }
  return Status::Ok();
}

StatusOr<std::string> NeuronExecutable::Fingerprint() {
  Sha256 hash;
  hash.Update(program_.neff);
  return Sha256::Hex(hash.Digest());
}

// An HloModuleProtoWithConfig: the module and the config XLA's readers insist on (the entry
// layout, which is the module's host program shape, and the replica counts).
StatusOr<ProgramText> NeuronExecutable::OptimizedProgram() {
  namespace fields = hlo::hlo_fields;
  std::string config;
  hlo::WireReader reader(program_.hlo_module);
  hlo::Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kModuleHostProgramShape) {
      hlo::AppendBytesField(&config, fields::kConfigEntryLayout, f.payload);
    }
  }
  hlo::AppendVarintField(&config, fields::kConfigReplicas, static_cast<uint64_t>(program_.num_replicas));
  hlo::AppendVarintField(&config, fields::kConfigPartitions, static_cast<uint64_t>(program_.num_partitions));
  std::string with_config;
  hlo::AppendBytesField(&with_config, fields::kWithConfigModule, program_.hlo_module);
  hlo::AppendBytesField(&with_config, fields::kWithConfigConfig, config);
  return ProgramText{"hlo_with_config", std::move(with_config)};
}

StatusOr<std::string> NeuronExecutable::SerializedDeviceAssignment() {
  return DeviceAssignmentBytes(program_.num_replicas, program_.num_partitions, program_.cores);
}

void NeuronExecutable::Delete() {
  std::map<int, std::shared_ptr<CoreModel>> unloaded;
  std::lock_guard<std::mutex> lock(mutex_);
  deleted_ = true;
  unloaded.swap(models_);  // unloaded after the lock, unless an execution still holds one
}

bool NeuronExecutable::IsDeleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return deleted_;
}

}  // namespace pjrt_neuron::engine::neuron
