// What a client is asked for: PJRT create options and the Neuron runtime's environment
// variables, checked once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

struct ClientOptions {
  std::string instance_type = "trn1.2xlarge";
  int logical_nc_config = 0;    // 0: the instance's default
  std::optional<std::string> visible_cores;  // NEURON_RT_VISIBLE_CORES syntax
  int num_cores = 0;            // NEURON_RT_NUM_CORES; 0: not set
  std::string engine_library_path;
  engine::Attributes engine_passthrough;
  // Multi-process jobs (torchrun, xmp.spawn, jax.distributed): this process's place in the job.
  int process_index = 0;
  int world_size = 1;
  std::vector<int> processes_num_cores;  // NEURON_PJRT_PROCESSES_NUM_DEVICES; empty: not given
  double peer_timeout_seconds = 300;     // PJRT_NEURON_COLLECTIVE_TIMEOUT
  std::shared_ptr<engine::KeyValueStore> kv_store;  // PJRT_Client_Create's callbacks, if given
};

// Parses PJRT create options and the environment; errors name the option and value.
// A non-empty `instance_type` (a topology's name) overrides both.
StatusOr<ClientOptions> ResolveClientOptions(const engine::Attributes& create_options,
                                             const std::string& instance_type = "");

}  // namespace pjrt_neuron::core
