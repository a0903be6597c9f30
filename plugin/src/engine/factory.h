// Builds the engine a client runs on, as PJRT_NEURON_ENGINE says (auto, sim or neuron): the
// Neuron runtime and neuronx-cc (engine/neuron/) on a Trainium host, else the simulator in this
// process or, for a process of a multi-process job, the instance daemon's through engine/remote/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

// This process's place in a multi-process job: the daemon of `lock_directory` serves it on
// simulated cores; on the Neuron runtime each process drives its own cores.
struct JobPlacement {
  std::string lock_directory;
  int logical_nc_config = 0;
  int instance_cores = 0;  // every core of the instance, which the daemon's engine drives
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;  // this process's
  std::vector<std::vector<int>> process_cores;  // every process's, by process index
  // On the Neuron runtime: `cores` are the job's numbers for this process's cores, which are
  // these cores of its host (NEURON_RT_VISIBLE_CORES).
  std::vector<int> physical_cores;
  double peer_timeout_seconds = 300;
  std::shared_ptr<KeyValueStore> kv_store;  // the framework's, when it gave one
};

struct EngineRequest {
  EngineOptions options;            // num_cores: the cores of an in-process engine
  std::optional<JobPlacement> job;  // set: attach to the instance daemon instead
  bool compile_only = false;        // compiling for a topology: no cores are used
};

enum class EngineChoice { kAuto, kSim, kNeuron };
// PJRT_NEURON_ENGINE (default auto); INVALID_ARGUMENT naming the value when it is none of them.
StatusOr<EngineChoice> ReadEngineChoice();
// The engine `choice` comes to on this host: auto is neuron when the Neuron SDK's default
// library and compiler work (never a library a test setting names), else sim.
EngineChoice ResolveEngineChoice(EngineChoice choice);

// With `job`, fills `members` with the job's processes once all of them have attached.
StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineRequest& request, std::vector<JobMember>* members);

// The plugin attributes of the engine the plugin would create (StableHLO versions); no client needed.
StatusOr<Attributes> EnginePluginAttributes(const std::string& library_path);

// The engine a client would run on ("engine": sim or neuron, or "engine_error") and, on the
// neuron engine, what its runtime and compiler report (DescribeNeuronRuntime).
Attributes DescribeEngine(bool with_memory);

}  // namespace pjrt_neuron::engine
