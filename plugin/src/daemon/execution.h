// Running one execution request on the engine: directly when the program has no collectives or
// the request brings every core of it, otherwise as a gang through the GangScheduler, whose
// ready gangs run here as one engine execution or as each core's own program at once.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "daemon/gang_scheduler.h"
#include "daemon/served_program.h"
#include "engine/engine.h"

namespace pjrt_neuron::daemon {

using ArgumentLists = std::vector<std::vector<std::shared_ptr<engine::Buffer>>>;  // [core][argument]
using CoreOutputs = std::map<int, std::vector<std::unique_ptr<engine::Buffer>>>;   // by core

class Executions {
 public:
  Executions(GangScheduler& gangs, bool trace) : gangs_(gangs), trace_(trace) {}

  // Runs `executable` on `cores` (this request's, args[d] on cores[d]) for a process of world
  // `job`; `timeout_seconds` bounds the wait for the other processes' cores.
  Status Run(int job, const std::shared_ptr<ServedExecutable>& executable, const std::vector<int>& cores,
             const ArgumentLists& args, const engine::ExecuteOptions& options, double timeout_seconds,
             CoreOutputs* outputs);

 private:
  GangScheduler& gangs_;
  const bool trace_;
};

}  // namespace pjrt_neuron::daemon
