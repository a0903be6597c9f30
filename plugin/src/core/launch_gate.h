// Single-device launches of one collective program meet before any reaches the engine. A
// client may launch a program of several cores one core at a time (execute_device), from a
// thread per core, as torch-xla's one-process multi-device data parallel does. XLA's CPU
// engine makes each launch wait inside the engine for the others, and when one never comes it
// ends the whole process after 40 s ("Termination timeout ... Exiting to ensure a consistent
// program state"). Here the launches wait for each other first, for the collective timeout,
// and the one left alone fails with DEADLINE_EXCEEDED naming the cores that never came.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

class LaunchGate {
 public:
  // The k-th launch under `launch_id` on `core` waits until every core of `cores` (the program's
  // device ids) has its k-th, then returns OK; DEADLINE_EXCEEDED after `timeout_seconds`. A
  // launch that arrives after its gang gave up fails at once with that gang's status.
  Status Arrive(int core, int64_t launch_id, const std::vector<int>& cores, double timeout_seconds,
                const std::string& program_name);

 private:
  struct Gang {
    std::set<int> arrived;
    bool open = false;
    Status failure;  // set when it gave up
  };
  using Key = std::pair<int64_t, int64_t>;  // launch id, execution number

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, std::shared_ptr<Gang>> gangs_;
  std::map<std::pair<int64_t, int>, int64_t> next_;  // (launch id, core) -> its next execution number
};

}  // namespace pjrt_neuron::core
