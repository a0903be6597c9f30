// Picks and builds the engine (factory.h).
#include "engine/factory.h"

#include <unistd.h>

#include <cstdlib>

#include "common/version.h"
#include "engine/cpu_partitioner.h"
#include "engine/neuron/neuron_engine.h"
#include "engine/remote/remote.h"
#include "engine/sim/sim_engine.h"

namespace pjrt_neuron::engine {
namespace {

StatusOr<std::unique_ptr<Engine>> ConnectDaemon(const EngineRequest& request, std::vector<JobMember>* members) {
  const JobPlacement& job = *request.job;
  remote::ConnectOptions connect;
  connect.lock_directory = job.lock_directory;
  connect.num_cores = job.instance_cores;
  connect.engine_library_path = request.options.library_path;
  // A daemon of another plugin version may speak another protocol: it gets its own address.
  // Each user has a daemon of their own (it serves its owner only).
  connect.instance_key = job.lock_directory + "|" + std::to_string(job.logical_nc_config) + "|" +
                         request.options.library_path + "|" + PluginVersion() + "|uid " + std::to_string(geteuid());
  connect.process_index = job.process_index;
  connect.world_size = job.world_size;
  connect.cores = job.cores;
  connect.peer_timeout_seconds = job.peer_timeout_seconds;
  std::vector<JobMember> ignored;
  return remote::ConnectInstanceEngine(connect, members != nullptr ? members : &ignored);
}

}  // namespace

StatusOr<EngineChoice> ReadEngineChoice() {
  const char* value = std::getenv("PJRT_NEURON_ENGINE");
  const std::string choice = value != nullptr ? value : "";
  if (choice.empty() || choice == "auto") return EngineChoice::kAuto;
  if (choice == "sim") return EngineChoice::kSim;
  if (choice == "neuron") return EngineChoice::kNeuron;
  return InvalidArgument("PJRT_NEURON_ENGINE='" + choice + "'; use auto, sim or neuron");
}

EngineChoice ResolveEngineChoice(EngineChoice choice) {
  if (choice != EngineChoice::kAuto) return choice;
  return DefaultNeuronAvailability().available ? EngineChoice::kNeuron : EngineChoice::kSim;
}

StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineRequest& request, std::vector<JobMember>* members) {
  PN_ASSIGN_OR_RETURN(EngineChoice asked, ReadEngineChoice());
  const EngineChoice choice = ResolveEngineChoice(asked);
  if (choice == EngineChoice::kNeuron && request.job.has_value()) {
    return Unimplemented(std::string(asked == EngineChoice::kAuto ? "this host has the Neuron SDK, but " : "") +
                         "multi-process jobs on the Neuron runtime are not implemented yet; "
                         "PJRT_NEURON_ENGINE=sim runs the job on simulated NeuronCores");
  }
  if (choice == EngineChoice::kNeuron) {
    auto engine = CreateNeuronEngine(request.options, request.compile_only, CpuEnginePartitioner(request.options));
    if (!engine.ok() && engine.status().code() == ErrorCode::kFailedPrecondition) {
      return FailedPrecondition(std::string(asked == EngineChoice::kAuto ? "the Neuron engine cannot start"
                                                                         : "PJRT_NEURON_ENGINE=neuron cannot work here") +
                                ": " + engine.status().message());
    }
    return engine;
  }
  if (!request.job.has_value()) return CreateSimEngine(request.options);
  return ConnectDaemon(request, members);
}

StatusOr<Attributes> EnginePluginAttributes(const std::string& library_path) {
  // JAX serialises StableHLO to the versions reported here; the simulator's are XLA's own,
  // which the Neuron engine's converter (jaxlib) reads as well.
  auto attributes = SimEnginePluginAttributes(library_path);
  if (attributes.ok()) return attributes;
  auto choice = ReadEngineChoice();
  if (choice.ok() && ResolveEngineChoice(choice.value()) == EngineChoice::kNeuron) return Attributes{};
  return attributes;
}

Attributes DescribeEngine(bool with_memory) {
  auto choice = ReadEngineChoice();
  if (!choice.ok()) return {{"engine_error", choice.status().message()}};
  const EngineChoice resolved = ResolveEngineChoice(choice.value());
  Attributes out = {{"engine", std::string(resolved == EngineChoice::kNeuron ? "neuron" : "sim")}};
  if (choice.value() == EngineChoice::kAuto && resolved == EngineChoice::kSim) {
    out.push_back({"neuron_unavailable", DefaultNeuronAvailability().why_not});
  }
  if (resolved == EngineChoice::kNeuron) {
    for (Attribute& a : DescribeNeuronRuntime(with_memory)) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace pjrt_neuron::engine
