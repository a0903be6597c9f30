// A spin lock for critical sections of a few dozen instructions taken on every execution, where
// std::mutex's lock and unlock cost more than the work they guard. A waiter that spins long
// yields, so a preempted holder gets the core back.
#pragma once

#include <sched.h>

#include <atomic>

namespace pjrt_neuron {

class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire);) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 100) sched_yield();
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace pjrt_neuron
