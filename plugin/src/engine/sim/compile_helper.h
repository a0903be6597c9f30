// Compiling in a helper process. XLA's CPU compiler stops its whole process when one of its
// internal checks fails (a CHECK: abort()), whatever the program's fault, and its loader does
// the same on damaged serialized executables (LLVM ERROR); in the user's process either would
// end the user's program. The helper (pjrt-neuron-instanced --compile-helper) holds an engine
// of its own: it compiles and sends the serialized executable back, which this process loads,
// and it loads a caller's serialized executable first, which this process loads only if the
// helper lived. A helper that dies fails that one request with the engine's last message, and
// the next request starts a new helper.
#pragma once

#include <sys/types.h>

#include <atomic>
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
  // OK when the engine loads `serialized` (with `overridden_options` when not null) and lives;
  // the engine's error, or INVALID_ARGUMENT naming the signal when loading ended the helper.
  Status CheckLoads(const std::string& serialized, const std::string* overridden_options);
  // The helper could not be started here (no helper program, no room for its log, no process):
  // the engine then compiles in its own process, which is better than not compiling.
  bool cannot_start() const { return cannot_start_.load(); }

 private:
  Status Start();
  void Stop();
  Status Died(const std::string& what, ErrorCode code = ErrorCode::kInternal);
  // One request (kind, three strings) and its reply (code, bytes); Died when the helper does.
  StatusOr<std::string> Request(uint32_t kind, const std::string& a, const char* b, size_t b_size,
                                const std::string& c, const std::string& what, ErrorCode death_code);

  EngineOptions options_;
  std::mutex mutex_;  // one compilation at a time per helper
  std::atomic<bool> cannot_start_{false};
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
