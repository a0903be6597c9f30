// Picks and builds the engine (factory.h).
#include "engine/factory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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

constexpr char kRootCommIdKey[] = "pjrt_neuron/neuron_rt_root_comm_id";
constexpr int kTorchXlaRootPort = 62182;  // torch-xla's Neuron set-up uses MASTER_ADDR with it

// NEURON_RT_ROOT_COMM_ID for a multi-process job, the same in every process: the launcher's
// (torch-xla sets it from MASTER_ADDR), else chosen by process 0 and shared through the
// framework's key-value store (jax.distributed), else MASTER_ADDR's host.
Status AgreeOnRootCommId(const JobPlacement& job) {
  const char* set = std::getenv("NEURON_RT_ROOT_COMM_ID");
  if (set != nullptr && *set != '\0') return Status::Ok();
  std::string root;
  if (job.kv_store != nullptr) {
    if (job.process_index == 0) {
      char host[256] = {0};
      if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "127.0.0.1");
      PN_ASSIGN_OR_RETURN(int port, FreeTcpPort());
      root = std::string(host) + ":" + std::to_string(port);
      PN_RETURN_IF_ERROR(job.kv_store->Put(kRootCommIdKey, root));
    } else {
      const int timeout_ms = static_cast<int>(std::min(job.peer_timeout_seconds, 2e6) * 1000);
      PN_ASSIGN_OR_RETURN(root, job.kv_store->Get(kRootCommIdKey, timeout_ms));
    }
  } else if (const char* master = std::getenv("MASTER_ADDR"); master != nullptr && *master != '\0') {
    root = std::string(master) + ":" + std::to_string(kTorchXlaRootPort);
  } else {
    return FailedPrecondition(
        "a multi-process job on the Neuron runtime needs NEURON_RT_ROOT_COMM_ID=host:port (rank 0's host, "
        "the same in every process); torch-xla sets it from MASTER_ADDR, and jax.distributed lets the "
        "plugin choose it");
  }
  setenv("NEURON_RT_ROOT_COMM_ID", root.c_str(), 0);
  return Status::Ok();
}

// One process's part of a job on the Neuron runtime: its own cores (NEURON_RT_VISIBLE_CORES,
// set here when the launcher did not), numbered as in the job, and the job's communicator.
StatusOr<std::unique_ptr<Engine>> CreateNeuronJobEngine(const EngineRequest& request, std::vector<JobMember>* members) {
  const JobPlacement& job = *request.job;
  const std::vector<int>& held = job.physical_cores;
  if (job.cores.empty() || held.size() != job.cores.size()) {
    return InvalidArgument("process " + std::to_string(job.process_index) + " holds no NeuronCore");
  }
  for (size_t i = 1; i < held.size(); ++i) {
    if (held[i] != held[i - 1] + 1) {
      return InvalidArgument("the Neuron runtime needs this process's NeuronCores contiguous; it holds " +
                             std::to_string(held.front()) + ".." + std::to_string(held.back()) + " with gaps");
    }
  }
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  if (visible == nullptr || *visible == '\0') {
    const std::string range = std::to_string(held.front()) + "-" + std::to_string(held.back());
    setenv("NEURON_RT_VISIBLE_CORES", range.c_str(), 0);  // read by nrt_init
  }
  PN_RETURN_IF_ERROR(AgreeOnRootCommId(job));
  EngineOptions options = request.options;
  options.num_cores = static_cast<int>(job.cores.size());
  options.first_core = job.cores.front();
  for (size_t p = 0; p < job.process_cores.size(); ++p) {
    if (job.process_cores[p].empty()) {
      return InvalidArgument("process " + std::to_string(p) + " of " + std::to_string(job.world_size) +
                             " holds no NeuronCore (NEURON_PJRT_PROCESSES_NUM_DEVICES)");
    }
    for (int core : job.process_cores[p]) options.job_cores.push_back(core);
    if (members != nullptr) members->push_back({static_cast<int>(p), 0, job.process_cores[p]});
  }
  std::sort(options.job_cores.begin(), options.job_cores.end());
  // The partitioner's CPU engine needs a device for every core number the job's programs name.
  EngineOptions partitioner_options = request.options;
  partitioner_options.num_cores = options.job_cores.back() + 1;
  return CreateNeuronEngine(options, request.compile_only, CpuEnginePartitioner(partitioner_options));
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
  if (choice == EngineChoice::kNeuron) {
    auto engine = request.job.has_value()
                      ? CreateNeuronJobEngine(request, members)
                      : CreateNeuronEngine(request.options, request.compile_only, CpuEnginePartitioner(request.options));
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
