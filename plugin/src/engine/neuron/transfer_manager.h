// The Trainium engine's asynchronous host-to-device transfers (PJRT's transfer manager): each
// buffer's device tensor is allocated up front and written part by part with nrt_tensor_write;
// a buffer is ready when its last part has arrived. Parts are written synchronously, so each
// part's event is complete on return.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/neuron/runtime.h"

namespace pjrt_neuron::engine::neuron {

StatusOr<std::unique_ptr<TransferManager>> CreateNeuronTransferManager(const std::shared_ptr<Runtime>& runtime,
                                                                       int core, const std::vector<ShapeSpec>& shapes,
                                                                       const std::string& memory_kind);

}  // namespace pjrt_neuron::engine::neuron
