// Executions on the engine: one request's own run, and the runs of a ready gang.
#include "daemon/execution.h"

#include <cstdio>
#include <thread>

#include "common/sha256.h"
#include "daemon/core_list.h"

namespace pjrt_neuron::daemon {
namespace {

using engine::Buffer;
using engine::ExecuteOptions;
using engine::ExecuteResult;

// What a request brings to a gang and takes from it.
struct ExecutionPart : GangPart {
  std::shared_ptr<ServedExecutable> executable;  // its process's program
  ExecuteOptions options;
  std::map<int, std::vector<std::shared_ptr<Buffer>>> args;  // by core
  CoreOutputs outputs;                                       // by core, once run
};

// The engine's argument table over one list per core, laid out in one array.
class FlatArguments {
 public:
  Status Add(const std::vector<std::shared_ptr<Buffer>>& list) {
    if (devices_ > 0 && list.size() != per_device_) {
      return InvalidArgument("the cores' argument lists differ in length (" + std::to_string(per_device_) + " and " +
                             std::to_string(list.size()) + ")");
    }
    per_device_ = list.size();
    ++devices_;
    for (auto& b : list) pointers_.push_back(b.get());
    return Status::Ok();
  }
  engine::ArgumentTable table() const { return engine::ArgumentTable(pointers_.data(), devices_, per_device_); }

 private:
  std::vector<Buffer*> pointers_;
  size_t devices_ = 0;
  size_t per_device_ = 0;
};

StatusOr<engine::ArgumentTable> OneCore(const std::vector<std::shared_ptr<Buffer>>& list, FlatArguments* flat) {
  PN_RETURN_IF_ERROR(flat->Add(list));
  return flat->table();
}

std::vector<std::unique_ptr<Buffer>> Owned(engine::OutputList<std::unique_ptr<Buffer>>&& outputs) {
  std::vector<std::unique_ptr<Buffer>> owned;
  owned.reserve(outputs.size());
  for (auto& out : outputs) owned.push_back(std::move(out));
  return owned;
}

Status AwaitAll(ExecuteResult& run) {
  for (auto& event : run.completions) {
    if (!event) continue;
    Status done = event->Await();
    if (!done.ok()) return done;
  }
  return Status::Ok();
}

Status RunDirectly(ServedExecutable& executable, const std::vector<int>& cores, const ArgumentLists& args,
                   const ExecuteOptions& options, CoreOutputs* outputs) {
  if (cores == executable.cores) {
    FlatArguments all;
    for (auto& list : args) PN_RETURN_IF_ERROR(all.Add(list));
    ExecuteResult run;
    PN_RETURN_IF_ERROR(executable.executable->Execute(all.table(), options, -1, &run));
    PN_RETURN_IF_ERROR(AwaitAll(run));
    for (size_t d = 0; d < cores.size(); ++d) (*outputs)[cores[d]] = Owned(std::move(run.outputs[d]));
    return Status::Ok();
  }
  // No collectives: each core's replica runs on its own, whenever its process asks.
  for (size_t d = 0; d < cores.size(); ++d) {
    FlatArguments one;
    PN_ASSIGN_OR_RETURN(engine::ArgumentTable table, OneCore(args[d], &one));
    ExecuteResult run;
    PN_RETURN_IF_ERROR(executable.executable->Execute(table, options, cores[d], &run));
    PN_RETURN_IF_ERROR(AwaitAll(run));
    (*outputs)[cores[d]] = Owned(std::move(run.outputs[0]));
  }
  return Status::Ok();
}

ExecutionPart& PartOf(const ReadyGang& gang, int core) { return static_cast<ExecutionPart&>(*gang.parts.at(core)); }

// Every core runs the same program: one engine execution over all of them.
Status RunGangTogether(const ReadyGang& gang) {
  auto& first = static_cast<ExecutionPart&>(*gang.first);
  FlatArguments all;
  for (int core : gang.cores) PN_RETURN_IF_ERROR(all.Add(PartOf(gang, core).args[core]));
  ExecuteResult run;
  Status status = first.executable->executable->Execute(all.table(), first.options, -1, &run);
  if (status.ok()) status = AwaitAll(run);
  if (!status.ok()) return status;
  for (size_t d = 0; d < gang.cores.size(); ++d) {
    int core = gang.cores[d];
    PartOf(gang, core).outputs[core] = Owned(std::move(run.outputs[d]));
  }
  return Status::Ok();
}

// The processes' programs differ but their collectives correspond: each core runs its own
// process's program at the same time, under one run id, and XLA matches the collectives by
// their channel ids.
Status RunGangApart(const ReadyGang& gang) {
  for (int core : gang.cores) {
    engine::Executable& executable = *PartOf(gang, core).executable->executable;
    if (!executable.CollectivesMeetAcrossPrograms()) {
      // Its engine matches a launch's cores by program, so different programs never meet.
      return FailedPrecondition("the processes of this job ran different programs whose collectives correspond ('" +
                                executable.name() + "' on NeuronCore " + std::to_string(core) +
                                "); this engine build runs a collective only among launches of one program. Run "
                                "the same program in every process, or set PJRT_NEURON_SIM_ENGINE=xla-cpu-pjrt");
    }
  }
  ExecuteOptions options = static_cast<ExecutionPart&>(*gang.first).options;
  options.launch_id = gang.launch_id;
  std::vector<ExecuteResult> runs(gang.cores.size());
  std::vector<Status> statuses(gang.cores.size(), Status(ErrorCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t d = 0; d < gang.cores.size(); ++d) {
    threads.emplace_back([&, d] {
      int core = gang.cores[d];
      ExecutionPart& part = PartOf(gang, core);
      FlatArguments one;
      auto table = OneCore(part.args[core], &one);
      statuses[d] = table.ok() ? part.executable->executable->Execute(*table, options, core, &runs[d]) : table.status();
      if (statuses[d].ok()) statuses[d] = AwaitAll(runs[d]);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& status : statuses) {
    if (!status.ok()) return status;
  }
  for (size_t d = 0; d < gang.cores.size(); ++d) {
    int core = gang.cores[d];
    PartOf(gang, core).outputs[core] = Owned(std::move(runs[d].outputs[0]));
  }
  return Status::Ok();
}

}  // namespace

Status Executions::Run(int job, const std::shared_ptr<ServedExecutable>& executable, const std::vector<int>& cores,
                       const ArgumentLists& args, const ExecuteOptions& options, double timeout_seconds,
                       CoreOutputs* outputs) {
  if (trace_) {
    std::fprintf(stderr, "execute %s cores=%s program cores=%s collectives=%d replicas=%d program=%s gang=%s\n",
                 executable->executable->name().c_str(), CoreList(cores).c_str(), CoreList(executable->cores).c_str(),
                 int(executable->has_collectives), executable->executable->num_replicas(),
                 Sha256::Hex(executable->program_key).substr(0, 12).c_str(),
                 Sha256::Hex(executable->gang_key).substr(0, 12).c_str());
  }
  if (cores.empty() || args.size() != cores.size()) {
    return InvalidArgument("an execution must name at least one NeuronCore, with one argument list each");
  }
  if (cores == executable->cores || !executable->has_collectives) {
    return RunDirectly(*executable, cores, args, options, outputs);
  }
  auto part = std::make_shared<ExecutionPart>();
  part->executable = executable;
  part->options = options;
  for (size_t d = 0; d < cores.size(); ++d) part->args[cores[d]] = args[d];
  GangArrival arrival;
  arrival.job = job;
  arrival.gang_key = executable->gang_key;
  arrival.program_key = executable->program_key;
  arrival.program_name = executable->executable->name();
  arrival.program_cores = executable->cores;
  arrival.cores = cores;
  arrival.launch_id = options.launch_id;
  arrival.timeout_seconds = timeout_seconds;
  arrival.part = part;
  PN_RETURN_IF_ERROR(gangs_.Join(arrival, [](const ReadyGang& gang) {
    return gang.one_program ? RunGangTogether(gang) : RunGangApart(gang);
  }));
  for (int core : cores) (*outputs)[core] = std::move(part->outputs[core]);
  return Status::Ok();
}

}  // namespace pjrt_neuron::daemon
