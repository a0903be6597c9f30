// The compile helper's two sides (compile_helper.h): this process spawns it and talks to it
// over a socket pair; the helper serves compilations from its own engine.
#include "engine/sim/compile_helper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/tool_process.h"
#include "engine/sim/sim_engine.h"


namespace pjrt_neuron::engine {
namespace {

constexpr uint32_t kCompile = 1;     // format, code, options -> serialized executable
constexpr uint32_t kCheckLoads = 2;  // "" or "override", serialized executable, options -> nothing

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);  // a dead helper is an error, not SIGPIPE
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteString(int fd, const char* data, size_t size) {
  const uint64_t length = size;
  return WriteAll(fd, &length, sizeof length) && WriteAll(fd, data, size);
}

bool ReadString(int fd, std::string* out) {
  uint64_t length = 0;
  if (!ReadAll(fd, &length, sizeof length) || length > (uint64_t{1} << 40)) return false;
  out->resize(length);
  return ReadAll(fd, out->data(), length);
}

// What the helper said last: the line of XLA's failed check or LLVM's fatal error when there is
// one (a stack trace after it adds little), else its last line.
std::string LastWords(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const off_t size = lseek(fd, 0, SEEK_END);
  const off_t start = size > (1 << 18) ? size - (1 << 18) : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  const bool read_ok = pread(fd, text.data(), text.size(), start) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!read_ok) return "";
  size_t at = text.rfind("Check failed");
  if (at == std::string::npos) at = text.rfind("LLVM ERROR");
  if (at == std::string::npos) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (text.empty()) return "";
    at = text.size() - 1;
  }
  size_t begin = text.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  const size_t end = text.find('\n', at);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace

std::vector<std::string> HelperArguments(const EngineOptions& options) {
  std::vector<std::string> args = {std::to_string(options.num_cores), options.library_path};
  for (const Attribute& a : options.passthrough) {
    if (auto* b = std::get_if<bool>(&a.value)) args.push_back(a.name + "=b:" + (*b ? "1" : "0"));
    if (auto* i = std::get_if<int64_t>(&a.value)) args.push_back(a.name + "=i:" + std::to_string(*i));
  }
  return args;
}

StatusOr<EngineOptions> ParseHelperArguments(int argc, char** argv) {
  if (argc < 2) return InvalidArgument("usage: pjrt-neuron-instanced LIBRARY --compile-helper NUM_CORES ENGINE_LIBRARY");
  EngineOptions options;
  options.num_cores = std::atoi(argv[0]);
  options.library_path = argv[1];
  options.compile_in_process = true;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || arg.size() < eq + 3 || arg[eq + 2] != ':') {
      return InvalidArgument("engine option '" + arg + "' is not NAME=b:VALUE or NAME=i:VALUE");
    }
    const std::string value = arg.substr(eq + 3);
    if (arg[eq + 1] == 'b') {
      options.passthrough.push_back({arg.substr(0, eq), value == "1"});
    } else {
      options.passthrough.push_back({arg.substr(0, eq), static_cast<int64_t>(std::atoll(value.c_str()))});
    }
  }
  return options;
}

CompileHelper::~CompileHelper() { Stop(); }

Status CompileHelper::Start() {
  const std::string library = PluginLibraryPath();
  const std::string program = ToolProgramPath(library);
  if (access(program.c_str(), X_OK) != 0) {
    return FailedPrecondition("the compile helper " + program +
                              " is missing; reinstall pjrt-neuron, set PJRT_NEURON_INSTANCE_DAEMON, or compile in "
                              "this process with PJRT_NEURON_COMPILE_ISOLATION=0");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string log_template = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                             "/pjrt-neuron-compile-helper-XXXXXX";
  const int log_fd = mkostemp(log_template.data(), O_CLOEXEC);
  if (log_fd < 0) return Unavailable("cannot create the compile helper's log: " + std::string(std::strerror(errno)));
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    close(log_fd);
    unlink(log_template.c_str());
    return Unavailable("cannot connect to a compile helper: " + std::string(std::strerror(errno)));
  }
  ToolSpawn spawn;
  spawn.argv = {program, library, "--compile-helper"};
  for (std::string& a : HelperArguments(options_)) spawn.argv.push_back(std::move(a));
  spawn.log_fd = log_fd;
  spawn.pass_fd = ends[1];
  auto pid = SpawnTool(spawn, "the compile helper");
  close(ends[1]);
  close(log_fd);
  if (!pid.ok()) {
    close(ends[0]);
    unlink(log_template.c_str());
    return pid.status();
  }
  fd_ = ends[0];
  pid_ = pid.value();
  log_path_ = log_template;
  return Status::Ok();
}

void CompileHelper::Stop() {
  if (fd_ >= 0) close(fd_);
  if (pid_ > 0) {
    // Not left to see the socket's end: a child this process forked (a DataLoader worker)
    // may hold a copy of it, and the helper keeps nothing worth a clean exit.
    kill(pid_, SIGKILL);
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (!log_path_.empty()) unlink(log_path_.c_str());
  fd_ = -1;
  pid_ = -1;
  log_path_.clear();
}

Status CompileHelper::Died(const std::string& what, ErrorCode code) {
  std::string how = "stopped";
  if (pid_ > 0) {
    kill(pid_, SIGKILL);  // no-op when it is gone already; a stuck one must not linger
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      how = "was ended by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    } else if (WIFEXITED(status)) {
      how = "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    pid_ = -1;
  }
  const std::string words = LastWords(log_path_);
  Stop();
  return Status(code, "XLA's CPU engine (in the compile helper) " + how + " " + what + "; this process goes on" +
                          (words.empty() ? std::string() : ". Its last words: " + words));
}

StatusOr<std::string> CompileHelper::Request(uint32_t kind, const std::string& a, const char* b, size_t b_size,
                                             const std::string& c, const std::string& what, ErrorCode death_code) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) {
    Status started = Start();
    if (!started.ok()) {
      cannot_start_ = true;
      return started;
    }
  }
  if (!WriteAll(fd_, &kind, sizeof kind) || !WriteString(fd_, a.data(), a.size()) || !WriteString(fd_, b, b_size) ||
      !WriteString(fd_, c.data(), c.size())) {
    return Died("before it took the request", death_code);
  }
  uint32_t code = 0;
  std::string reply;
  if (!ReadAll(fd_, &code, sizeof code) || !ReadString(fd_, &reply)) return Died(what, death_code);
  if (code != 0) return Status(static_cast<ErrorCode>(code), reply);
  return reply;
}

StatusOr<std::string> CompileHelper::Compile(const Program& program, const std::string& options) {
  return Request(kCompile, program.format, program.code, program.code_size, options, "while compiling this program",
                 ErrorCode::kInternal);
}

Status CompileHelper::CheckLoads(const std::string& serialized, const std::string* overridden_options) {
  return Request(kCheckLoads, overridden_options != nullptr ? "override" : "", serialized.data(), serialized.size(),
                 overridden_options != nullptr ? *overridden_options : std::string(),
                 "while loading this serialized executable (it is damaged or not the engine's)",
                 ErrorCode::kInvalidArgument)
      .status();
}

int ServeCompiles(int fd, const EngineOptions& options) {
  auto engine = CreateSimEngine(options);
  uint32_t kind = 0;
  std::string a, b, c;
  while (ReadAll(fd, &kind, sizeof kind) && ReadString(fd, &a) && ReadString(fd, &b) && ReadString(fd, &c)) {
    Status status = engine.status();
    std::string serialized;
    if (status.ok() && kind == kCompile) {
      Program program{a, b.data(), b.size()};
      auto compiled = engine.value()->Compile(program, c);
      status = compiled.status();
      if (status.ok()) {
        auto bytes = compiled.value()->Serialize();
        status = bytes.status();
        if (status.ok()) serialized = std::move(bytes.value());
      }
    } else if (status.ok() && kind == kCheckLoads) {
      status = engine.value()->Deserialize(b, a.empty() ? nullptr : &c).status();
    } else if (status.ok()) {
      status = InvalidArgument("unknown compile helper request " + std::to_string(kind));
    }
    const uint32_t reply_code = static_cast<uint32_t>(status.code());
    const std::string& reply = status.ok() ? serialized : status.message();
    if (!WriteAll(fd, &reply_code, sizeof reply_code) || !WriteString(fd, reply.data(), reply.size())) return 1;
  }
  return 0;
}

}  // namespace pjrt_neuron::engine
