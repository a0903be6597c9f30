// Finding and starting pjrt-neuron-instanced, the program beside the plugin library that runs
// the instance daemon and the compile helper from that same library.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron {

// The path of the shared library this code was linked into (the plugin); "" when unknown.
std::string PluginLibraryPath();

// PJRT_NEURON_INSTANCE_DAEMON, or pjrt-neuron-instanced beside `library`.
std::string ToolProgramPath(const std::string& library);

struct ToolSpawn {
  std::vector<std::string> argv;  // argv[0] is the program
  int log_fd = -1;                // becomes its stdout and stderr; stdin is /dev/null
  int pass_fd = -1;               // when set, becomes its descriptor 3
  bool new_session = false;       // to outlive this process
};

// The started process's pid; INTERNAL naming `what` and the error when it could not start.
StatusOr<pid_t> SpawnTool(const ToolSpawn& spawn, const std::string& what);

}  // namespace pjrt_neuron
