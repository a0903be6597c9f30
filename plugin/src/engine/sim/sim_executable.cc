// The simulator engine's executables (sim_executable.h).
#include "engine/sim/sim_executable.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/inline_vector.h"
#include "engine/named_values.h"
#include "engine/sim/engine_library.h"
#include "engine/sim/host_outputs.h"
#include "engine/sim/sim_buffer.h"
#include "engine/sim/sim_event.h"
#include "hlo/collective_program.h"
#include "hlo/cost_analysis.h"
#include "hlo/module_view.h"
#include "hlo/compile_options.h"

namespace pjrt_neuron::engine::sim {

SimExecutable::SimExecutable(const CpuClient* client, PJRT_LoadedExecutable* loaded)
    : client_(client), api_(client->api()), loaded_(loaded) {}

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
    addressable_cores_.push_back(client_->CoreOf(devices.addressable_devices[i]));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Executable>> SimExecutable::Deserialize(const CpuClient* client, const std::string& bytes,
                                                                 const std::string* overridden_options) {
  std::vector<std::string> output_kinds;
  const std::string engine_bytes = SplitHostOutputs(bytes, &output_kinds);
  const PJRT_Api* api = client->api();
  INNER_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
  args.client = client->client();
  args.serialized_executable = engine_bytes.data();
  args.serialized_executable_size = engine_bytes.size();
  if (overridden_options != nullptr) {
    args.overridden_serialized_compile_options = overridden_options->data();
    args.overridden_serialized_compile_options_size = overridden_options->size();
  }
  PN_RETURN_IF_ERROR(TakeError(api, api->PJRT_Executable_DeserializeAndLoad(&args)));
  auto executable = std::make_unique<SimExecutable>(client, args.loaded_executable);
  PN_RETURN_IF_ERROR(executable->Init());
  executable->set_serialized(engine_bytes);
  if (!output_kinds.empty()) executable->PlaceOutputs(output_kinds);
  return std::unique_ptr<Executable>(std::move(executable));
}

StatusOr<std::string> SimExecutable::Fingerprint() {
  INNER_ARGS(PJRT_Executable_Fingerprint_Args, args);
  args.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_Fingerprint(&args)));
  return std::string(args.executable_fingerprint, args.executable_fingerprint_size);
}

StatusOr<Attributes> SimExecutable::CostAnalysis() {
  INNER_ARGS(PJRT_Executable_GetCostAnalysis_Args, args);
  args.executable = executable_;
  Status status = TakeError(api_, api_->PJRT_Executable_GetCostAnalysis(&args));
  if (status.ok()) return AttributesOf(args.properties, args.num_properties);
  if (status.code() != ErrorCode::kUnimplemented) return status;
  // Newer engine builds leave it unimplemented; frameworks still ask for flops and bytes
  // (jax's cost_analysis()): counted from the optimized program, under XLA's names.
  auto program = OptimizedProgram();
  if (!program.ok()) return status;
  auto module = hlo::ModuleView::ReadHloProgram(program->code, program->format);
  if (!module.ok()) return status;
  PN_ASSIGN_OR_RETURN(hlo::ProgramCost cost, hlo::AnalyzeProgramCost(module.value()));
  double flops = cost.vector_ops;
  for (const auto& [type, matmul] : cost.matmul_flops) flops += matmul;
  return Attributes{{"flops", float(flops)},
                    {"transcendentals", float(cost.transcendental_ops)},
                    {"bytes accessed", float(cost.parameter_bytes + cost.output_bytes)}};
}

StatusOr<int64_t> SimExecutable::SizeOfGeneratedCodeInBytes() {
  INNER_ARGS(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, args);
  args.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_SizeOfGeneratedCodeInBytes(&args)));
  return args.size_in_bytes;
}

StatusOr<CompiledMemoryStats> SimExecutable::MemoryStats() {
  // A mutex, not std::call_once: call_once's thread-local state would leak out of the
  // library's export list when libstdc++ is linked statically.
  std::lock_guard<std::mutex> lock(memory_stats_mutex_);
  if (!memory_stats_computed_) {
    memory_stats_ = ComputeMemoryStats();
    memory_stats_computed_ = true;
  }
  return memory_stats_;
}

StatusOr<CompiledMemoryStats> SimExecutable::ComputeMemoryStats() {
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

void SimExecutable::PlaceOutputs(const std::vector<std::string>& kinds) {
  placed_outputs_ = outputs_->shapes;
  host_outputs_.assign(placed_outputs_.size(), false);
  for (size_t i = 0; i < placed_outputs_.size() && i < kinds.size(); ++i) {
    if (kinds[i] != "pinned_host") continue;
    host_outputs_[i] = true;
    placed_outputs_[i].memory_kind = "pinned_host";
  }
}

StatusOr<std::string> SimExecutable::Serialize() {
  PN_ASSIGN_OR_RETURN(std::string bytes, EngineBytes());
  if (placed_outputs_.empty()) return bytes;
  std::vector<std::string> kinds;
  for (const OutputShape& output : placed_outputs_) kinds.push_back(output.memory_kind);
  return WithHostOutputs(std::move(bytes), kinds);
}

StatusOr<std::string> SimExecutable::EngineBytes() {
  if (serialized_.has_value()) return *serialized_;
  INNER_ARGS(PJRT_Executable_Serialize_Args, args);
  args.executable = executable_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Executable_Serialize(&args)));
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) args.serialized_executable_deleter(args.serialized_executable);
  return bytes;
}

StatusOr<ProgramText> SimExecutable::OptimizedProgram() {
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

StatusOr<std::string> SimExecutable::SerializedDeviceAssignment() {
  INNER_ARGS(PJRT_LoadedExecutable_GetDeviceAssignment_Args, args);
  args.executable = loaded_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_GetDeviceAssignment(&args)));
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_device_assignment_deleter != nullptr) {
    args.serialized_device_assignment_deleter(args.serialized_device_assignment);
  }
  return bytes;
}

void SimExecutable::Delete() {
  INNER_ARGS(PJRT_LoadedExecutable_Delete_Args, args);
  args.executable = loaded_;
  TakeError(api_, api_->PJRT_LoadedExecutable_Delete(&args));
}

bool SimExecutable::IsDeleted() {
  INNER_ARGS(PJRT_LoadedExecutable_IsDeleted_Args, args);
  args.executable = loaded_;
  if (!TakeError(api_, api_->PJRT_LoadedExecutable_IsDeleted(&args)).ok()) return true;
  return args.is_deleted;
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
  auto copy = Deserialize(client_, *bytes, &options);
  if (!copy.ok()) return nullptr;
  single_core_ = std::move(copy.value());
  return static_cast<SimExecutable*>(single_core_.get());
}

bool SimExecutable::HasCollectives() {
  std::lock_guard<std::mutex> lock(single_core_mutex_);
  if (has_collectives_ < 0) {
    auto program = OptimizedProgram();
    // One it cannot read may have collectives.
    has_collectives_ = !program.ok() || hlo::HasCollectives(program->code, program->format);
  }
  return has_collectives_ != 0;
}

StatusOr<size_t> SimExecutable::PositionOfOnlyCore(const ArgumentTable& args, int only_core) {
  const auto position = std::find(addressable_cores_.begin(), addressable_cores_.end(), only_core);
  if (addressable_cores_.size() != size_t(num_replicas_ * num_partitions_) || position == addressable_cores_.end() ||
      args.size() != 1) {
    return InvalidArgument("PJRT_LoadedExecutable_Execute: a launch of program '" + name_ + "' on NeuronCore " +
                           std::to_string(only_core) + " alone needs that core among the program's " +
                           std::to_string(addressable_cores_.size()) + " addressable cores and one argument list (got " +
                           std::to_string(args.size()) + ")");
  }
  return size_t(position - addressable_cores_.begin());
}

Status SimExecutable::ExecuteOnEveryCoreForOne(const ArgumentTable& args, const ExecuteOptions& options,
                                               int only_core, ExecuteResult* result) {
  const size_t num_cores = addressable_cores_.size();
  PN_ASSIGN_OR_RETURN(const size_t mine, PositionOfOnlyCore(args, only_core));
  const size_t num_args = args[0].size();
  std::vector<std::unique_ptr<Buffer>> copies;
  std::vector<Buffer*> table(num_cores * num_args);
  for (size_t d = 0; d < num_cores; ++d) {
    for (size_t i = 0; i < num_args; ++i) {
      Buffer* arg = args[0][i];
      if (d == mine) {
        table[d * num_args + i] = arg;
        continue;
      }
      PN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> copy, arg->CopyTo(addressable_cores_[d], arg->memory_kind()));
      table[d * num_args + i] = copy.get();
      copies.push_back(std::move(copy));
    }
  }
  // A launch id of its own: launches from other cores of the same program under the caller's id
  // must not count toward this one's barrier.
  static std::atomic<int> next_private_launch_id{1 << 30};
  ExecuteOptions private_options = options;
  private_options.launch_id = next_private_launch_id.fetch_add(1);
  ExecuteResult all;
  PN_RETURN_IF_ERROR(Execute(ArgumentTable(table.data(), num_cores, num_args), private_options, -1, &all));
  // The copies and the other cores' results go once the others are done.
  for (size_t d = 0; d < num_cores; ++d) {
    if (d != mine && all.completions[d]) PN_RETURN_IF_ERROR(all.completions[d]->Await());
  }
  result->outputs.resize(1);
  result->outputs[0] = std::move(all.outputs[mine]);
  result->completions.push_back(std::move(all.completions[mine]));
  return Status::Ok();
}

Status SimExecutable::ExecuteWhenEveryCoreComes(const ArgumentTable& args, const ExecuteOptions& options,
                                                int only_core, ExecuteResult* result) {
  PN_ASSIGN_OR_RETURN(const size_t mine, PositionOfOnlyCore(args, only_core));
  std::unique_lock<std::mutex> lock(meetings_mutex_);
  const std::pair<int, int64_t> key{options.launch_id, next_meeting_[{options.launch_id, only_core}]++};
  std::shared_ptr<Meeting>& slot = meetings_[key];
  if (slot == nullptr) slot = std::make_shared<Meeting>();
  std::shared_ptr<Meeting> meeting = slot;
  meeting->args[only_core].assign(args[0].begin(), args[0].end());
  if (meeting->args.size() == addressable_cores_.size()) {
    meetings_.erase(key);
    lock.unlock();
    const size_t num_args = args[0].size();
    std::vector<Buffer*> table;
    table.reserve(addressable_cores_.size() * num_args);
    for (int core : addressable_cores_) {
      const std::vector<Buffer*>& row = meeting->args[core];
      if (row.size() != num_args) {
        meeting->status = InvalidArgument("PJRT_LoadedExecutable_Execute: the one-core launches of program '" + name_ +
                                          "' have different argument counts (" + std::to_string(row.size()) +
                                          " and " + std::to_string(num_args) + ")");
        break;
      }
      table.insert(table.end(), row.begin(), row.end());
    }
    if (meeting->status.ok()) {
      meeting->status =
          Execute(ArgumentTable(table.data(), addressable_cores_.size(), num_args), options, -1, &meeting->all);
    }
    lock.lock();
    meeting->done = true;
    meetings_changed_.notify_all();
  } else {
    // core::LaunchGate let this launch through only once every core had launched, so the others
    // are on their way; the bound is for a caller that skipped it.
    const bool came = meetings_changed_.wait_for(lock, std::chrono::minutes(10), [&] { return meeting->done; });
    if (!came) {
      return Status(ErrorCode::kDeadlineExceeded, "PJRT_LoadedExecutable_Execute: collective program '" + name_ +
                                                      "' launched on NeuronCore " + std::to_string(only_core) +
                                                      " alone; its other cores never launched it");
    }
  }
  if (!meeting->status.ok()) return meeting->status;
  result->outputs.resize(1);
  result->outputs[0] = std::move(meeting->all.outputs[mine]);
  result->completions.push_back(std::move(meeting->all.completions[mine]));
  return Status::Ok();
}

Status SimExecutable::Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                              ExecuteResult* result) {
  if (only_core >= 0 && num_replicas_ * num_partitions_ > 1 && client_->gates_multi_core_launches()) {
    SimExecutable* copy = host_outputs_.empty() ? SingleCoreCopy() : nullptr;
    if (copy) return copy->Execute(args, options, only_core, result);
    if (!HasCollectives()) return ExecuteOnEveryCoreForOne(args, options, only_core, result);
    return ExecuteWhenEveryCoreComes(args, options, only_core, result);
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
  exec.execute_device = only_core >= 0 ? client_->device(only_core) : nullptr;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_LoadedExecutable_Execute(&exec)));

  result->outputs.resize(num_devices);
  result->completions.reserve(num_devices);
  for (size_t d = 0; d < num_devices; ++d) {
    const int core = only_core >= 0 ? only_core : (d < addressable_cores_.size() ? addressable_cores_[d] : -1);
    auto& outputs = result->outputs[d];
    outputs.reserve(num_outputs);
    for (size_t o = 0; o < num_outputs; ++o) {
      PJRT_Buffer* out = output_lists[d][o];
      outputs.push_back(core >= 0 ? std::make_unique<SimBuffer>(client_, out, outputs_, o, core)
                                : std::make_unique<SimBuffer>(client_, out));
      if (o < host_outputs_.size() && host_outputs_[o] && core >= 0) {
        PN_ASSIGN_OR_RETURN(outputs[o], outputs[o]->CopyTo(core, "pinned_host"));
      }
    }
    result->completions.push_back(WrapEvent(api_, events[d]));
  }
  return Status::Ok();
}

}  // namespace pjrt_neuron::engine::sim
