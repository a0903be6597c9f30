// Builds the engine a client runs on: the simulator in this process, or, for a process of a
// multi-process job, the instance daemon's engine through engine/remote/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

// This process's place in a multi-process job; the daemon of `lock_directory` serves it.
struct JobPlacement {
  std::string lock_directory;
  int logical_nc_config = 0;
  int instance_cores = 0;  // every core of the instance, which the daemon's engine drives
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;  // this process's
  double peer_timeout_seconds = 300;
};

struct EngineRequest {
  EngineOptions options;            // num_cores: the cores of an in-process engine
  std::optional<JobPlacement> job;  // set: attach to the instance daemon instead
};

// With `job`, fills `members` with the job's processes once all of them have attached.
StatusOr<std::unique_ptr<Engine>> CreateEngine(const EngineRequest& request, std::vector<JobMember>* members);

// The plugin attributes of the engine the plugin would create (StableHLO versions); no client needed.
StatusOr<Attributes> EnginePluginAttributes(const std::string& library_path);

}  // namespace pjrt_neuron::engine
