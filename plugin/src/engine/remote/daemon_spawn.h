// Reaching the instance daemon: this user's daemon at the instance's address, started (in its
// own session, under a lock in a directory of this user's own) when nobody listens there yet.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/remote/remote.h"

namespace pjrt_neuron::engine::remote {

// A connection to this user's daemon at `address`; `log_path` is set to the daemon's log when
// no daemon answered at first.
StatusOr<int> ConnectOrSpawn(const ConnectOptions& options, const std::string& address, std::string* log_path);

}  // namespace pjrt_neuron::engine::remote
