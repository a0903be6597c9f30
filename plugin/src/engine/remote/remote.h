// Multi-process mode: framework processes reach the instance's NeuronCores through one daemon.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine::remote {

struct ConnectOptions {
  std::string instance_key;   // instance, LNC, lock directory: one daemon per distinct key
  std::string lock_directory;
  int num_cores = 0;          // of the whole instance
  std::string engine_library_path;
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;     // this process's
  double peer_timeout_seconds = 300;
};

// Attaches to the instance daemon (starting it if needed) and waits for the whole world.
StatusOr<std::unique_ptr<Engine>> ConnectInstanceEngine(const ConnectOptions& options,
                                                        std::vector<JobMember>* world);

}  // namespace pjrt_neuron::engine::remote
