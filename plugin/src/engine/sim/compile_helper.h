// Compiling in a helper process. XLA's CPU compiler stops its whole process when one of its
// internal checks fails (a CHECK: abort()), whatever the program's fault; a compile in the
// user's process would end the user's program. The helper (pjrt-neuron-instanced
// --compile-helper) holds an engine of its own, compiles, and sends the serialized executable
// back; this process loads it. A helper that dies fails that one compilation with the
// engine's last message, and the next compilation starts a new helper.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>

#include "engine/engine.h"

namespace pjrt_neuron::engine {

class CompileHelper {
 public:
  explicit CompileHelper(EngineOptions options) : options_(std::move(options)) {}
  ~CompileHelper();
  CompileHelper(const CompileHelper&) = delete;
  CompileHelper& operator=(const CompileHelper&) = delete;

  // The engine's serialized executable, or the engine's error; INTERNAL naming the signal and
  // the engine's last words when the helper died compiling it.
  StatusOr<std::string> Compile(const Program& program, const std::string& options);

 private:
  Status Start();
  void Stop();
  Status Died(const std::string& what);

  EngineOptions options_;
  std::mutex mutex_;  // one compilation at a time per helper
  int fd_ = -1;
  pid_t pid_ = -1;
  std::string log_path_;
};

// The helper's side: compiles each request arriving on `fd` with an in-process engine made
// from `options`, until the other end closes. Returns the process's exit code.
int ServeCompiles(int fd, const EngineOptions& options);

// The helper's command line after its program and the plugin library: "--compile-helper",
// then these, read back by ParseHelperArguments.
std::vector<std::string> HelperArguments(const EngineOptions& options);
StatusOr<EngineOptions> ParseHelperArguments(int argc, char** argv);

}  // namespace pjrt_neuron::engine
