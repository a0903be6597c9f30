// The NeuronCore model, the only door from the C API to the engine: client, devices,
// memories, buffers, events, executables, topology. It knows the simulated instance and the
// Engine interface, nothing of XLA CPU or libnrt. This header gathers the pieces for api/.
#pragma once

#include "core/buffer.h"
#include "core/client.h"
#include "core/client_options.h"
#include "core/device.h"
#include "core/executable.h"
#include "core/sizes.h"
#include "core/topology.h"
#include "core/topology_compile.h"
