// Multi-process mode's asynchronous host-to-device transfers: parts gather in this process and
// each buffer goes to the daemon in one upload at its last part.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::engine::remote {

// The engine's upload of a dense host array (Engine::BufferFromHost).
using UploadFn = std::function<StatusOr<TransferResult>(int core, const HostBufferSpec& spec)>;

// `bytes[i]`: the dense size of `shapes[i]`.
std::unique_ptr<TransferManager> CreateRemoteTransferManager(UploadFn upload, int core, const std::string& memory_kind,
                                                             const std::vector<ShapeSpec>& shapes,
                                                             const std::vector<size_t>& bytes);

}  // namespace pjrt_neuron::engine::remote
