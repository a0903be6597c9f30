// The Trainium engine: programs compiled by neuronx-cc (a subprocess) into NEFFs and run by
// the Neuron runtime (libnrt.so.1, loaded with dlopen) on this process's NeuronCores.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

// Runs XLA's SPMD partitioner on a program of several partitions (with its compile options)
// and returns the one program every core runs, a serialized HloModuleProto that keeps the
// module's parameter and output shardings. The factory hands in XLA's CPU engine's.
using SpmdPartitioner = std::function<StatusOr<std::string>(const Program& program, const std::string& options)>;

// `compile_only`: no runtime session (compiling for a topology); executions are refused.
StatusOr<std::unique_ptr<Engine>> CreateNeuronEngine(const EngineOptions& options, bool compile_only,
                                                     SpmdPartitioner partitioner);

// Whether the real Neuron SDK is here, by its default names only (libnrt.so.1 on the loader's
// path with at least one visible NeuronCore, neuronx-cc on PATH and runnable), never by a
// test setting. Checked once per process; `why_not` says what is missing.
struct NeuronAvailability {
  bool available = false;
  std::string why_not;
};
const NeuronAvailability& DefaultNeuronAvailability();

// What the Neuron runtime and compiler of this process's settings report, for `pjrt-neuron ls`
// and `selftest`: neuron_library, runtime_version, instance_family, instance_size_code,
// total_cores, visible_cores, neuronx_cc, compiler_version; `*_error` attributes say why one
// is missing. Without `with_memory` nothing claims a core (no nrt_init unless this process
// already runs the runtime); with it, hbm_bytes_per_core (or hbm_error) from a session.
Attributes DescribeNeuronRuntime(bool with_memory);

// A TCP port free on this host now (for a collectives root address).
StatusOr<int> FreeTcpPort();

// Ends every neuronx-cc (and StableHLO converter) run in progress; their compiles fail
// with CANCELLED.
void CancelNeuronCompilations();

}  // namespace pjrt_neuron::engine
