// NeuronCores are exclusive to one process: an OS file lock per physical core, held from
// nrt_init to nrt_close and dropped by the kernel when the process dies.
#ifndef NEURON_STANDIN_CORE_LOCKS_H_
#define NEURON_STANDIN_CORE_LOCKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace standin {

class FileLock {
 public:
  // Null when the core is held by another process (its pid in *holder if known) or on error.
  static std::unique_ptr<FileLock> TryAcquire(const std::string& path, std::string* error,
                                              long* holder);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

class CoreLocks {
 public:
  // Claims logical cores [first, first + count) at `lnc` physical cores each.
  static std::unique_ptr<CoreLocks> Claim(const std::string& directory, uint32_t first,
                                          uint32_t count, uint32_t lnc, std::string* error);
  // Claims the lowest `count` contiguous free logical cores of `total`.
  static std::unique_ptr<CoreLocks> ClaimAnyContiguous(const std::string& directory,
                                                       uint32_t count, uint32_t total,
                                                       uint32_t lnc, std::string* error);
  uint32_t first() const { return first_; }
  uint32_t count() const { return count_; }

 private:
  CoreLocks() = default;
  uint32_t first_ = 0;
  uint32_t count_ = 0;
  std::vector<std::unique_ptr<FileLock>> locks_;
};

}  // namespace standin

#endif  // NEURON_STANDIN_CORE_LOCKS_H_
