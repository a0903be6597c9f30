// The simulator engine: XLA's CPU PJRT plugin (xla_cpu_pjrt.so), loaded with dlopen and
// called at its own API version.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

StatusOr<std::unique_ptr<Engine>> CreateSimEngine(const EngineOptions& options);
// The simulator engine's plugin attributes (StableHLO versions); needs no client.
StatusOr<Attributes> SimEnginePluginAttributes(const std::string& library_path);

}  // namespace pjrt_neuron::engine
