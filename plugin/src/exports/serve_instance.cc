// The entry points of pjrt-neuron-instanced (tools/), which is only a launcher for this library
// so that both sides are one build: PjrtNeuron_ServeInstance, the instance daemon of
// multi-process jobs, and PjrtNeuron_ServeCompiles, the simulator's compile helper.
#include <algorithm>
#include <cstdlib>
#include <cstdio>

#include "daemon/daemon.h"
#include "engine/sim/compile_helper.h"

extern "C" __attribute__((visibility("default"))) int PjrtNeuron_ServeInstance(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pjrt-neuron-instanced LIBRARY ADDRESS NUM_CORES ENGINE_LIBRARY\n");
    return 2;
  }
  pjrt_neuron::daemon::DaemonOptions options;
  options.address = argv[0];
  options.num_cores = std::atoi(argv[1]);
  options.engine_library_path = argv[2];
  if (const char* idle = std::getenv("PJRT_NEURON_DAEMON_IDLE_SECONDS"); idle != nullptr && *idle != '\0') {
    // At least a second: the process that started the daemon has yet to connect.
    options.idle_seconds = std::max(1.0, std::atof(idle));
  }
  // Read once here: set (to anything) or not, as it was when the daemon started.
  options.trace = std::getenv("PJRT_NEURON_DAEMON_TRACE") != nullptr;
  return pjrt_neuron::daemon::ServeInstance(options);
}

// argv: NUM_CORES ENGINE_LIBRARY [NAME=b:VALUE | NAME=i:VALUE]...; the socket is descriptor 3.
extern "C" __attribute__((visibility("default"))) int PjrtNeuron_ServeCompiles(int argc, char** argv) {
  auto options = pjrt_neuron::engine::ParseHelperArguments(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n", options.status().message().c_str());
    return 2;
  }
  return pjrt_neuron::engine::ServeCompiles(3, options.value());
}
