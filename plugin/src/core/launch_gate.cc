// Matching single-device launches of a collective program (launch_gate.h).
#include "core/launch_gate.h"

#include <chrono>
#include <cstdio>

namespace pjrt_neuron::core {

Status LaunchGate::Arrive(int core, int64_t launch_id, const std::vector<int>& cores, double timeout_seconds,
                          const std::string& program_name) {
  std::unique_lock<std::mutex> lock(mutex_);
  const Key key{launch_id, next_[{launch_id, core}]++};
  std::shared_ptr<Gang>& slot = gangs_[key];
  if (slot == nullptr) slot = std::make_shared<Gang>();
  std::shared_ptr<Gang> gang = slot;
  gang->arrived.insert(core);
  const bool everyone = gang->arrived.size() >= cores.size();
  if (!gang->failure.ok()) {  // late: the others gave up on this one already
    if (everyone) gangs_.erase(key);
    return gang->failure;
  }
  if (everyone) {
    gang->open = true;
    gangs_.erase(key);
    changed_.notify_all();
    return Status::Ok();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  changed_.wait_until(lock, deadline, [&] { return gang->open || !gang->failure.ok(); });
  if (gang->open) return Status::Ok();
  if (gang->failure.ok()) {
    std::string missing;
    for (int c : cores) {
      if (gang->arrived.count(c) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(c);
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout_seconds);
    gang->failure = Status(ErrorCode::kDeadlineExceeded,
                           "'" + program_name + "' is a collective program of " + std::to_string(cores.size()) +
                               " NeuronCores launched one core at a time, and NeuronCore(s) " + missing +
                               " did not launch it within " + seconds +
                               " s (PJRT_NEURON_COLLECTIVE_TIMEOUT); launch it on every core of the program, "
                               "from a thread each, or on all of them in one call");
    changed_.notify_all();
  }
  return gang->failure;
}

}  // namespace pjrt_neuron::core
