// The simulator engine's asynchronous host-to-device transfers: the XLA CPU plugin's own
// transfer manager, its buffers wrapped as they are retrieved.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sim/cpu_client.h"

namespace pjrt_neuron::engine::sim {

StatusOr<std::unique_ptr<TransferManager>> CreateSimTransferManager(const CpuClient* client, int core,
                                                                    const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind);

}  // namespace pjrt_neuron::engine::sim
