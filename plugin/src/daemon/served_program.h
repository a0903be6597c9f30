// A program as the daemon serves it: the engine's executable and the keys that decide which
// executions of different processes meet (the same program, or programs whose collectives
// correspond), read once from the optimized program when it is compiled or loaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pjrt_neuron::daemon {

struct ServedExecutable {
  std::unique_ptr<engine::Executable> executable;
  std::string program_key;  // equal for the same program compiled or loaded by any process
  // Equal for programs whose executions meet: the same program, or programs whose collectives
  // correspond one to one (hlo::CollectiveSignature).
  std::string gang_key;
  bool has_collectives = false;
  std::vector<int> cores;  // every core of the program, in device-assignment order
};

std::shared_ptr<ServedExecutable> ServeExecutable(std::unique_ptr<engine::Executable> executable);

}  // namespace pjrt_neuron::daemon
