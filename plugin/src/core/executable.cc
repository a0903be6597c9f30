// Executables: serialisation, device assignments, and execution with HBM checked first.
#include "core/executable.h"

#include <algorithm>

#include "core/client.h"
#include "core/estimate_report.h"
#include "core/profiler.h"
#include "core/sizes.h"
#include "hlo/collective_program.h"
#include "hlo/compile_options.h"

namespace pjrt_neuron::core {

StatusOr<std::string> CompiledProgram::Serialize() {
  PN_ASSIGN_OR_RETURN(std::string engine_bytes, executable_->Serialize());
  return std::string(kSerializedExecutableMagic) + engine_bytes;
}

StatusOr<std::string> LoadedExecutable::SerializedDeviceAssignment() {
  PN_ASSIGN_OR_RETURN(std::string engine_bytes, engine_executable().SerializedDeviceAssignment());
  Client* client = client_;
  return hlo::MapDeviceAssignment(engine_bytes, [client](int64_t core) { return client->DeviceIdOf(core); });
}

StatusOr<const std::vector<LoadedExecutable::LogicalId>*> LoadedExecutable::AddressableLogicalIds() {
  std::lock_guard<std::mutex> lock(logical_ids_mutex_);
  if (logical_ids_ != nullptr) return logical_ids_.get();
  PN_ASSIGN_OR_RETURN(std::string assignment, SerializedDeviceAssignment());
  // The assignment lists device ids computation by computation, replica by replica.
  std::vector<int64_t> ids_in_order;
  PN_RETURN_IF_ERROR(hlo::MapDeviceAssignment(assignment, [&](int64_t id) -> StatusOr<int64_t> {
                       ids_in_order.push_back(id);
                       return id;
                     }).status());
  const int replicas = std::max(1, compiled().num_replicas());
  auto logical = std::make_unique<std::vector<LogicalId>>();
  for (Device* device : addressable_devices()) {
    auto it = std::find(ids_in_order.begin(), ids_in_order.end(), device->id());
    if (it == ids_in_order.end()) {
      return Internal("NeuronCore " + std::to_string(device->id()) + " runs the program but is not in its device assignment");
    }
    const int index = static_cast<int>(it - ids_in_order.begin());
    logical->push_back({index % replicas, index / replicas});
  }
  logical_ids_ = std::move(logical);
  return logical_ids_.get();
}

// Graph collection: outputs of the right shapes, never computed.
Status LoadedExecutable::RecordOnlyResult(const ArgumentLists& args, Device* only_device, ExecuteResult* result) {
  for (size_t d = 0; d < args.size(); ++d) {
    Device* device = only_device != nullptr ? only_device : addressable_devices().at(d);
    engine::OutputList<std::unique_ptr<Buffer>> outputs;
    for (const engine::OutputShape& shape : engine_executable().outputs()) {
      PN_ASSIGN_OR_RETURN(auto buffer, client_->CreateUninitializedBuffer(device, shape.type, shape.dims));
      outputs.push_back(std::move(buffer));
    }
    result->outputs.push_back(std::move(outputs));
    result->completions.push_back(Event::Completed());
  }
  return Status::Ok();
}

void LoadedExecutable::Delete() {
  deleted_ = true;
  engine_executable().Delete();
}

const LoadedExecutable::HbmPlan& LoadedExecutable::hbm_plan() {
  if (hbm_plan_ready_.load(std::memory_order_acquire)) return hbm_plan_;
  std::lock_guard<std::mutex> lock(hbm_plan_mutex_);
  if (!hbm_plan_ready_.load(std::memory_order_relaxed)) {
    auto stats = engine_executable().MemoryStats();
    if (stats.ok()) {
      hbm_plan_.known = true;
      hbm_plan_.transient = stats->temp_size_in_bytes + stats->output_size_in_bytes - stats->alias_size_in_bytes;
      hbm_plan_.may_donate = stats->alias_size_in_bytes > 0;
      hbm_plan_.purpose = "running '" + engine_executable().name() + "' (" + FormatBytes(stats->output_size_in_bytes) +
                          " of outputs, " + FormatBytes(stats->temp_size_in_bytes) + " of temporaries)";
    }
    hbm_plan_ready_.store(true, std::memory_order_release);
  }
  return hbm_plan_;
}

bool LoadedExecutable::LaunchesMeet() {
  // Not std::call_once: its thread-local helpers would be exported from the static libstdc++.
  if (launches_meet_known_.load(std::memory_order_acquire)) return launches_meet_;
  std::lock_guard<std::mutex> lock(launches_meet_mutex_);
  if (!launches_meet_known_.load(std::memory_order_relaxed)) {
    if (addressable_devices().size() >= 2) {
      auto optimized = engine_executable().OptimizedProgram();
      // Unknown: launched as before, on its own; the engine's wait stays the only one.
      if (optimized.ok() && hlo::HasCollectives(optimized->code, optimized->format)) {
        for (Device* device : addressable_devices()) device_ids_.push_back(device->id());
        launches_meet_ = true;
      }
    }
    launches_meet_known_.store(true, std::memory_order_release);
  }
  return launches_meet_;
}

Status LoadedExecutable::Execute(const ArgumentLists& args, const engine::ExecuteOptions& options, Device* only_device,
                                 ExecuteResult* result) {
  if (deleted_) return FailedPrecondition("the executable has been deleted (PJRT_LoadedExecutable_Delete)");
  if (record_only_) return RecordOnlyResult(args, only_device, result);
  const auto& devices = addressable_devices();
  if (only_device == nullptr && args.size() != devices.size()) {
    return InvalidArgument("the program runs on " + std::to_string(devices.size()) + " NeuronCore(s) but " +
                           std::to_string(args.size()) + " argument lists were given");
  }
  if (only_device != nullptr && args.size() != 1) {
    return InvalidArgument("execute_device was given, so exactly one argument list is expected, got " +
                           std::to_string(args.size()));
  }
  auto target = [&](size_t d) { return only_device != nullptr ? only_device : devices[d]; };
  InlineVector<engine::Buffer*, 32> engine_args;
  engine_args.reserve(args.size() * args.num_args);
  for (size_t d = 0; d < args.size(); ++d) {
    Device* expected = target(d);
    if (args.num_args > 0) {
      if (size_t dead = FirstNotLiveHandle(args.lists[d], args.num_args); dead != args.num_args) {
        return InvalidArgument("argument " + std::to_string(dead) + " is not a live buffer");
      }
    }
    for (size_t i = 0; i < args.num_args; ++i) {
      Buffer* b = args.at(d, i);
      if (b->device()->client() != client_) {
        return InvalidArgument("argument " + std::to_string(i) + " belongs to another client");
      }
      Status usable = b->CheckUsableSeen();
      if (!usable.ok()) return usable.WithContext("argument " + std::to_string(i));
      if (b->device() != expected) {
        return InvalidArgument("argument " + std::to_string(i) + " is on NeuronCore " +
                               std::to_string(b->device()->id()) + " but the program runs on NeuronCore " +
                               std::to_string(expected->id()) + "; copy it there first");
      }
      engine_args.push_back(&b->engine_buffer());
    }
  }
  // Outputs and temporaries must fit in each core's HBM before anything runs.
  const HbmPlan& plan = hbm_plan();
  if (plan.known) {
    for (size_t d = 0; d < args.size(); ++d) PN_RETURN_IF_ERROR(target(d)->CheckFits(plan.transient, plan.purpose));
  }
  if (only_device != nullptr && LaunchesMeet()) {
    PN_RETURN_IF_ERROR(launch_gate_.Arrive(only_device->id(), options.launch_id, device_ids_,
                                           client_->collective_timeout_seconds(), engine_executable().name()));
  }
  const int64_t start_us = estimate_id_.empty() ? 0 : NowMicros();
  const int64_t profile_start_ns = profiler::Active() ? profiler::NowNs() : 0;
  engine::ExecuteResult run;
  const Status ran = engine_executable().Execute(engine::ArgumentTable(engine_args.data(), args.size(), args.num_args),
                                                 options, only_device != nullptr ? only_device->core() : -1, &run);
  if (ran.ok() && profile_start_ns != 0) {
    for (size_t d = 0; d < run.completions.size() && d < args.size(); ++d) {
      profiler::NoteExecution(target(d)->id(), engine_executable().name(), profile_start_ns, run.completions[d]);
    }
  }
  if (ran.ok() && !estimate_id_.empty()) {
    std::vector<int> device_ids;
    for (size_t d = 0; d < args.size(); ++d) device_ids.push_back(target(d)->id());
    ReportExecution(estimate_id_, device_ids, start_us, NowMicros());
  }
  if (plan.may_donate) {
    for (size_t d = 0; d < args.size(); ++d) {
      for (size_t i = 0; i < args.num_args; ++i) args.at(d, i)->IsDeleted();  // donated inputs stop counting against HBM
    }
  }
  if (!ran.ok()) return ran;
  if (plan.known) {
    for (size_t d = 0; d < args.size(); ++d) target(d)->NotePeak(plan.transient);
  }
  result->outputs.resize(run.outputs.size());
  for (size_t d = 0; d < run.outputs.size(); ++d) {
    auto& wrapped = result->outputs[d];
    PN_RETURN_IF_ERROR(client_->AdoptOutputs(run.outputs[d], &wrapped));
    for (auto& buffer : wrapped) {
      // Outputs moved to host memory after the run are ready when their copy is, not before.
      if (d < run.completions.size() && buffer->memory()->is_hbm()) buffer->set_ready_event(run.completions[d]);
    }
  }
  result->completions.reserve(run.completions.size());
  for (auto& event : run.completions) result->completions.push_back(std::make_unique<Event>(std::move(event)));
  return Status::Ok();
}

}  // namespace pjrt_neuron::core
