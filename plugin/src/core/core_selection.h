// Which NeuronCores this process gets, and the OS-level locks that make them exclusive,
// as the Neuron runtime does it (NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

// Parses "3", "0-3", "0,1,2" or "0-1,2-3": the cores must be contiguous and exist.
StatusOr<std::vector<int>> ParseVisibleCores(const std::string& value, int total_cores);

// Locks held on physical cores; released when the last client of the process lets go,
// or by the kernel when the process dies, however it dies.
class CoreLease {
 public:
  ~CoreLease();
  const std::vector<int>& cores() const { return cores_; }

  // Claims exactly `cores`; fails naming the core and the process that holds it.
  static StatusOr<std::shared_ptr<CoreLease>> Claim(const std::string& instance, const std::vector<int>& cores);
  // Claims the first `count` contiguous free cores.
  static StatusOr<std::shared_ptr<CoreLease>> ClaimAny(const std::string& instance, int count, int total_cores);

  struct CoreLock;  // one locked core; shared by the clients of a process

 private:
  std::vector<int> cores_;
  std::vector<std::shared_ptr<CoreLock>> locks_;
};

struct CoreHolder {
  int core;
  int pid;  // 0 when the core is free
};

// Which process holds each core of an instance (for `pjrt-neuron ls -w`).
std::vector<CoreHolder> CoreHolders(const std::string& instance, int total_cores);

std::string LockDirectory(const std::string& instance);

}  // namespace pjrt_neuron::core
