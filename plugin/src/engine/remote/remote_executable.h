// Multi-process mode's executables: programs compiled and held by the instance daemon, run on
// this process's cores by request.
#pragma once

#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/remote/channel.h"

namespace pjrt_neuron::engine::remote {

// `own_cores`: this process's cores; `peer_timeout_seconds` (the client's) goes with each execution.
std::unique_ptr<Executable> NewRemoteExecutable(std::shared_ptr<Channel> channel, ExecutableInfo info,
                                                const std::vector<int>& own_cores, double peer_timeout_seconds);

}  // namespace pjrt_neuron::engine::remote
