// XLA's SPMD partitioner for the Neuron engine, as XLA's CPU engine runs it: the program is
// compiled there with a dump of the module right after partitioning switched on (the compile
// options' env_option_overrides), and that module, before any CPU-specific pass, is the one
// program every core runs.
#pragma once

#include "engine/engine.h"
#include "engine/neuron/neuron_engine.h"

namespace pjrt_neuron::engine {

// The CPU engine is made at the first program of several partitions, with `options`.
SpmdPartitioner CpuEnginePartitioner(const EngineOptions& options);

}  // namespace pjrt_neuron::engine
