// The Trainium engine: programs compiled by neuronx-cc (a subprocess) into NEFFs and run by
// the Neuron runtime (libnrt.so.1, loaded with dlopen) on this process's NeuronCores.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

// `compile_only`: no runtime session (compiling for a topology); executions are refused.
StatusOr<std::unique_ptr<Engine>> CreateNeuronEngine(const EngineOptions& options, bool compile_only);

// Whether the real Neuron SDK is here, by its default names only (libnrt.so.1 on the loader's
// path with at least one visible NeuronCore, neuronx-cc on PATH and runnable), never by a
// test setting. Checked once per process; `why_not` says what is missing.
struct NeuronAvailability {
  bool available = false;
  std::string why_not;
};
const NeuronAvailability& DefaultNeuronAvailability();

// Ends every neuronx-cc (and StableHLO converter) run in progress; their compiles fail
// with CANCELLED.
void CancelNeuronCompilations();

}  // namespace pjrt_neuron::engine
