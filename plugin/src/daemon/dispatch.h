// Answers a session's requests: decodes each (engine/remote/protocol.h), calls the engine,
// keeps what the engine made in the session's objects, and encodes the reply.
#pragma once

#include <string>

#include "daemon/execution.h"
#include "daemon/gang_scheduler.h"
#include "daemon/worlds.h"
#include "engine/engine.h"
#include "engine/remote/protocol.h"

namespace pjrt_neuron::daemon {

class Dispatcher {
 public:
  Dispatcher(engine::Engine& engine, GangScheduler& gangs, bool trace) : engine_(engine), executions_(gangs, trace) {}

  // The reply to one request of `session` (nothing for a one-way request); `window` holds the
  // connection's bulk bytes.
  std::string Handle(Session& session, const std::string& request, const engine::remote::SharedWindow& window);

 private:
  std::string Execute(Session& session, const engine::remote::ExecuteRequest& request);

  engine::Engine& engine_;
  Executions executions_;
};

}  // namespace pjrt_neuron::daemon
