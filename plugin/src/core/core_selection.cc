// Core selection (core_selection.h): NEURON_RT_VISIBLE_CORES syntax and the per-core lock files.
#include "core/core_selection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "common/settings.h"

namespace pjrt_neuron::core {
namespace {

Status BadVisibleCores(const std::string& value, const std::string& why) {
  return InvalidArgument("NEURON_RT_VISIBLE_CORES='" + value + "': " + why);
}

bool ParseInt(const std::string& text, int* out) {
  if (text.empty() || text.size() > 6) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *out = std::stoi(text);
  return true;
}

}  // namespace

StatusOr<std::vector<int>> ParseVisibleCores(const std::string& value, int total_cores) {
  std::vector<int> cores;
  std::stringstream items(value);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t dash = item.find('-');
    int first, last;
    if (dash == std::string::npos) {
      if (!ParseInt(item, &first)) return BadVisibleCores(value, "'" + item + "' is not a core index or a range like 0-3");
      last = first;
    } else if (!ParseInt(item.substr(0, dash), &first) || !ParseInt(item.substr(dash + 1), &last)) {
      return BadVisibleCores(value, "'" + item + "' is not a core index or a range like 0-3");
    }
    if (last < first) return BadVisibleCores(value, "range '" + item + "' ends before it starts");
    for (int c = first; c <= last; ++c) cores.push_back(c);
  }
  if (cores.empty()) return BadVisibleCores(value, "no cores listed");
  for (size_t i = 1; i < cores.size(); ++i) {
    if (cores[i] != cores[i - 1] + 1) {
      return BadVisibleCores(value, "cores must be contiguous and ascending (core " + std::to_string(cores[i]) +
                                        " follows core " + std::to_string(cores[i - 1]) + ")");
    }
  }
  if (cores.back() >= total_cores) {
    return BadVisibleCores(value, "core " + std::to_string(cores.back()) + " does not exist; this instance has cores 0-" +
                                      std::to_string(total_cores - 1));
  }
  return cores;
}

std::string LockDirectory(const std::string& instance) {
  return settings::Text(settings::Id::kLockDir) + "/" + instance;
}

// One open file description per core per process; the kernel drops its lock at exit.
struct CoreLease::CoreLock {
  int fd = -1;
  ~CoreLock() {
    if (fd >= 0) close(fd);
  }
};

namespace {

std::mutex registry_mutex;
std::map<std::string, std::weak_ptr<CoreLease::CoreLock>>& Registry() {
  static auto* registry = new std::map<std::string, std::weak_ptr<CoreLease::CoreLock>>();
  return *registry;
}

std::string LockPath(const std::string& instance, int core) {
  return LockDirectory(instance) + "/core-" + std::to_string(core) + ".lock";
}

Status EnsureDirectory(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += "/" + part;
    if (mkdir(partial.c_str(), 01777) == 0) {
      chmod(partial.c_str(), 01777);  // shared by every user's processes, as the cores are
    } else if (errno != EEXIST) {
      return Unavailable("cannot create the core lock directory " + partial + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

int HolderPid(int fd) {
  char buffer[32] = {0};
  ssize_t n = pread(fd, buffer, sizeof(buffer) - 1, 0);
  return n > 0 ? std::atoi(buffer) : 0;
}

struct flock WholeFile(short type) {
  struct flock lock;
  std::memset(&lock, 0, sizeof(lock));
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  return lock;
}

StatusOr<std::shared_ptr<CoreLease::CoreLock>> LockCore(const std::string& instance, int core) {
  const std::string path = LockPath(instance, core);
  auto& held = Registry()[path];
  if (auto existing = held.lock()) return existing;  // another client of this process
  PN_RETURN_IF_ERROR(EnsureDirectory(LockDirectory(instance)));
  auto lock = std::make_shared<CoreLease::CoreLock>();
  // The directory is every user's: a link planted there must not make us truncate the file it
  // points at, so no symbolic links and no second name of another file.
  lock->fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (lock->fd < 0 && errno == ELOOP) {
    return Status(ErrorCode::kPermissionDenied, path + " is a symbolic link; refusing to use it as a core lock (remove it)");
  }
  if (lock->fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  struct stat info {};
  if (fstat(lock->fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1) {
    return Status(ErrorCode::kPermissionDenied,
                  path + " is not a plain file of one name (a link to another file?); refusing to use it as a core "
                         "lock (remove it)");
  }
  fchmod(lock->fd, 0666);
  struct flock request = WholeFile(F_WRLCK);
  if (fcntl(lock->fd, F_OFD_SETLK, &request) != 0) {
    int pid = HolderPid(lock->fd);
    return Status(ErrorCode::kResourceExhausted,
                  "NeuronCore " + std::to_string(core) + " of " + instance + " is already in use by process " +
                      (pid > 0 ? std::to_string(pid) : std::string("(unknown)")) +
                      "; pick other cores with NEURON_RT_VISIBLE_CORES or stop that process");
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(lock->fd, 0) != 0 || pwrite(lock->fd, pid.data(), pid.size(), 0) < 0) {
    return Unavailable("cannot record the holder of " + path + ": " + std::strerror(errno));
  }
  held = lock;
  return lock;
}

}  // namespace

// The registry holds weak references only, so releasing needs no registry lock.
CoreLease::~CoreLease() = default;

StatusOr<std::shared_ptr<CoreLease>> CoreLease::Claim(const std::string& instance, const std::vector<int>& cores) {
  std::lock_guard<std::mutex> guard(registry_mutex);
  auto lease = std::shared_ptr<CoreLease>(new CoreLease());
  lease->cores_ = cores;
  for (int core : cores) {
    PN_ASSIGN_OR_RETURN(auto lock, LockCore(instance, core));
    lease->locks_.push_back(std::move(lock));
  }
  return lease;
}

StatusOr<std::shared_ptr<CoreLease>> CoreLease::ClaimAny(const std::string& instance, int count, int total_cores) {
  if (count < 1 || count > total_cores) {
    return InvalidArgument("NEURON_RT_NUM_CORES=" + std::to_string(count) + " but " + instance + " has " +
                           std::to_string(total_cores) + " NeuronCores");
  }
  Status last_failure;
  for (int first = 0; first + count <= total_cores; ++first) {
    std::vector<int> cores;
    for (int c = first; c < first + count; ++c) cores.push_back(c);
    auto lease = Claim(instance, cores);
    if (lease.ok()) return lease;
    last_failure = lease.status();
  }
  return Status(ErrorCode::kResourceExhausted, "no " + std::to_string(count) + " contiguous free NeuronCores on " +
                                                   instance + " (NEURON_RT_NUM_CORES); " + last_failure.message());
}

std::vector<CoreHolder> CoreHolders(const std::string& instance, int total_cores) {
  std::vector<CoreHolder> holders;
  for (int core = 0; core < total_cores; ++core) {
    CoreHolder holder{core, 0};
    int fd = open(LockPath(instance, core).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct flock probe = WholeFile(F_WRLCK);
      if (fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) holder.pid = HolderPid(fd);
      close(fd);
    }
    holders.push_back(holder);
  }
  return holders;
}

}  // namespace pjrt_neuron::core
