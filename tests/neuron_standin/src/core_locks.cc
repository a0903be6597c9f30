// NeuronCores are exclusive to one process: an OS file lock per physical core, held from
// nrt_init to nrt_close and dropped by the kernel when the process dies.
#include "core_locks.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace standin {

std::unique_ptr<FileLock> FileLock::TryAcquire(const std::string& path, std::string* error,
                                               long* holder) {
  *holder = 0;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  // flock, not fcntl: fcntl locks are per process, so a second claim from this process
  // would succeed and closing any descriptor of the file would drop the lock.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int saved = errno;
    char text[32] = {};
    if (pread(fd, text, sizeof text - 1, 0) > 0) *holder = std::strtol(text, nullptr, 10);
    close(fd);
    if (saved != EWOULDBLOCK) *error = "cannot lock " + path + ": " + std::strerror(saved);
    return nullptr;
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for messages; the lock itself is what counts.
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

FileLock::~FileLock() { close(fd_); }

std::unique_ptr<CoreLocks> CoreLocks::Claim(const std::string& directory, uint32_t first,
                                            uint32_t count, uint32_t lnc, std::string* error) {
  if (mkdir(directory.c_str(), 0777) != 0 && errno != EEXIST) {
    *error = "cannot create NEURON_STANDIN_LOCK_DIR " + directory + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<CoreLocks> claimed(new CoreLocks);
  claimed->first_ = first;
  claimed->count_ = count;
  for (uint32_t physical = first * lnc; physical < (first + count) * lnc; ++physical) {
    long holder = 0;
    std::string path = directory + "/neuroncore-" + std::to_string(physical) + ".lock";
    auto lock = FileLock::TryAcquire(path, error, &holder);
    if (!lock) {
      if (error->empty()) {
        *error = "NeuronCore " + std::to_string(physical / lnc) + " (physical core " +
                 std::to_string(physical) + ") is in use by another process" +
                 (holder ? " (pid " + std::to_string(holder) + ")" : std::string());
      }
      return nullptr;
    }
    claimed->locks_.push_back(std::move(lock));
  }
  return claimed;
}

std::unique_ptr<CoreLocks> CoreLocks::ClaimAnyContiguous(const std::string& directory,
                                                         uint32_t count, uint32_t total,
                                                         uint32_t lnc, std::string* error) {
  std::string last_error;
  for (uint32_t first = 0; first + count <= total; ++first) {
    std::string attempt_error;
    auto claimed = Claim(directory, first, count, lnc, &attempt_error);
    if (claimed) return claimed;
    last_error = attempt_error;
  }
  *error = "no " + std::to_string(count) + " contiguous free NeuronCores among " +
           std::to_string(total) + " (last: " + last_error + ")";
  return nullptr;
}

}  // namespace standin
