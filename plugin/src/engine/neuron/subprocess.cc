// Helper programs run to completion, cancellable (subprocess.h).
#include "engine/neuron/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern char** environ;

namespace pjrt_neuron::engine::neuron {
namespace {

constexpr size_t kKeptOutput = size_t{4} << 20;
constexpr double kKillGraceSeconds = 3;

std::atomic<uint64_t> cancel_generation{0};
volatile sig_atomic_t sigint_seen = 0;

void OnSigint(int) { sigint_seen = 1; }

// Our SIGINT handler is installed while any subprocess runs; the one before it gets the
// signal afterwards (Python's raises KeyboardInterrupt, the default ends the process).
class SigintWatch {
 public:
  SigintWatch() {
    std::lock_guard<std::mutex> lock(mutex());
    if (users()++ > 0) return;
    sigint_seen = 0;
    struct sigaction ours;
    std::memset(&ours, 0, sizeof ours);
    ours.sa_handler = OnSigint;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGINT, &ours, &previous());
    if (previous().sa_handler == SIG_IGN) sigaction(SIGINT, &previous(), nullptr);  // the user wants none
  }
  ~SigintWatch() {
    bool forward = false;
    {
      std::lock_guard<std::mutex> lock(mutex());
      if (--users() > 0) return;
      if (previous().sa_handler != SIG_IGN) sigaction(SIGINT, &previous(), nullptr);
      forward = sigint_seen != 0;
      sigint_seen = 0;
    }
    if (forward) raise(SIGINT);
  }
  static bool Seen() { return sigint_seen != 0; }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static int& users() {
    static int n = 0;
    return n;
  }
  static struct sigaction& previous() {
    static struct sigaction a;
    return a;
  }
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::string FindExecutable(const std::string& name) {
  auto executable = [](const std::string& path) {
    struct stat info;
    return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

void CancelSubprocesses() { cancel_generation.fetch_add(1); }

StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& options) {
  if (options.argv.empty()) return Internal("no program to run");
  const std::string program = FindExecutable(options.argv[0]);
  if (program.empty()) return FailedPrecondition("'" + options.argv[0] + "' was not found (PATH or a path)");

  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    bool replaced = false;
    for (const auto& [key, value] : options.environment) replaced |= entry.compare(0, key.size() + 1, key + "=") == 0;
    if (!replaced) env_strings.push_back(std::move(entry));
  }
  for (const auto& [key, value] : options.environment) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Fd log;
  if (!options.output_path.empty()) {
    log.Reset(open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (log.get() < 0) return Internal("cannot write '" + options.output_path + "': " + std::strerror(errno));
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Internal(std::string("pipe2 failed: ") + std::strerror(errno));
  Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  const char* directory = options.working_directory.empty() ? nullptr : options.working_directory.c_str();

  SigintWatch watch;
  const uint64_t generation = cancel_generation.load();
  const pid_t pid = fork();
  if (pid < 0) return Internal(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own group, so that killing it takes its children too
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct sigaction default_action;
    std::memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigaction(SIGINT, &default_action, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(write_end.get(), 1);
    dup2(write_end.get(), 2);
    if (directory != nullptr && chdir(directory) != 0) _exit(126);
    execve(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);
  write_end.Reset();

  SubprocessResult result;
  const auto start = std::chrono::steady_clock::now();
  double next_report = options.progress_after_seconds;
  double interval = options.progress_after_seconds;
  double kill_sent_at = -1;
  double exited_at = -1;
  bool pipe_open = true;
  int wait_status = 0;
  bool exited = false;
  char chunk[65536];
  while (!exited || (pipe_open && Since(start) - exited_at < 1.0)) {
    if (pipe_open) {
      struct pollfd p = {read_end.get(), POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        ssize_t n = read(read_end.get(), chunk, sizeof chunk);
        if (n > 0) {
          result.output.append(chunk, static_cast<size_t>(n));
          if (result.output.size() > kKeptOutput) result.output.erase(0, result.output.size() - kKeptOutput);
          if (log.get() >= 0 && write(log.get(), chunk, static_cast<size_t>(n)) < 0) log.Reset();
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          pipe_open = false;
        }
      }
    } else {
      usleep(20000);
    }
    if (!exited && waitpid(pid, &wait_status, WNOHANG) == pid) {
      exited = true;
      exited_at = Since(start);  // a grandchild may hold the pipe: read on for a moment only
    }
    if (exited) continue;
    const double elapsed = Since(start);
    if (!result.cancelled && (SigintWatch::Seen() || cancel_generation.load() != generation)) {
      result.cancelled = true;
      kill(-pid, SIGTERM);
      kill_sent_at = elapsed;
    } else if (result.cancelled && kill_sent_at >= 0 && elapsed - kill_sent_at > kKillGraceSeconds) {
      kill(-pid, SIGKILL);
      kill_sent_at = -1;
    }
    if (!result.cancelled && options.on_progress && interval > 0 && elapsed >= next_report) {
      options.on_progress(elapsed);
      interval = std::min(interval * 2, 60.0);
      next_report = elapsed + interval;
    }
  }
  kill(-pid, SIGKILL);  // what is left of its group
  if (WIFSIGNALED(wait_status)) {
    result.signal = WTERMSIG(wait_status);
  } else {
    result.exit_code = WEXITSTATUS(wait_status);
  }
  if (result.exit_code == 127 && !result.cancelled && result.output.empty()) {
    return FailedPrecondition("'" + program + "' could not be started");
  }
  return result;
}

StatusOr<std::vector<std::string>> SplitShellWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0; else word += c;
    } else if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < text.size() && std::strchr("\"\\$`", text[i + 1]) != nullptr) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 < text.size()) word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) return InvalidArgument(std::string("unterminated ") + quote + " quote in '" + text + "'");
  if (in_word) words.push_back(word);
  return words;
}

}  // namespace pjrt_neuron::engine::neuron
