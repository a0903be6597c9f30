// Runs a helper program (neuronx-cc, the StableHLO converter) to completion: output captured,
// progress reported while it runs long, and killed (its whole process group) when the process
// gets SIGINT or when CancelSubprocesses() is called.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is a path, or a name looked up on PATH
  std::string working_directory;  // empty: ours
  std::vector<std::pair<std::string, std::string>> environment;  // set on top of ours
  std::string output_path;        // stdout and stderr also go here when set
  double progress_after_seconds = 0;  // 0: no progress reports
  std::function<void(double elapsed_seconds)> on_progress;
};

struct SubprocessResult {
  int exit_code = -1;   // valid when signal == 0
  int signal = 0;       // the signal that ended it
  bool cancelled = false;  // we ended it: SIGINT or CancelSubprocesses()
  std::string output;   // stdout and stderr together (the last 4 MiB)
};

// FAILED_PRECONDITION when the program cannot be started.
StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

// The path of `name` (a path is returned as is when executable); empty when not found.
std::string FindExecutable(const std::string& name);

// Ends every subprocess running now; their callers see `cancelled`.
void CancelSubprocesses();

// Splits like a POSIX shell: blanks separate words, quotes and backslashes group; no expansion.
StatusOr<std::vector<std::string>> SplitShellWords(const std::string& text);

}  // namespace pjrt_neuron::engine::neuron
