// The simulator engine's events: the XLA CPU plugin's PJRT_Event behind the Event interface.
#pragma once

#include "engine/engine.h"

namespace pjrt_neuron::engine::sim {

// Takes ownership of `event`; null (the engine had nothing to wait for) is a completed event.
EventRef WrapEvent(const PJRT_Api* api, PJRT_Event* event);

}  // namespace pjrt_neuron::engine::sim
