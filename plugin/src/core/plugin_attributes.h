// What frameworks ask of the plugin before any client exists: the engine's StableHLO versions
// and the plugin's version.
#pragma once

#include "common/status.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

StatusOr<engine::Attributes> PluginAttributes();

// Which engine a client would run on and what its runtime reports (engine::DescribeEngine).
engine::Attributes EngineReport(bool with_memory);

}  // namespace pjrt_neuron::core
