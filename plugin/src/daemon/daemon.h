// The instance daemon of multi-process jobs on the simulator: one process per instance that
// owns every NeuronCore's engine, which framework processes reach through engine/remote/.
#pragma once

#include <string>

namespace pjrt_neuron::daemon {

struct DaemonOptions {
  std::string address;
  int num_cores = 0;
  std::string engine_library_path;
  double idle_seconds = 10;
  bool trace = false;  // PJRT_NEURON_DAEMON_TRACE: log every execution to the daemon's log
};

// Runs the daemon until no process has used it for `idle_seconds`; the exit status.
int ServeInstance(const DaemonOptions& options);

}  // namespace pjrt_neuron::daemon
