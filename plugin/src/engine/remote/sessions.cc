// Sessions' connections closed at fork in children (sessions.h).
#include "engine/remote/sessions.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace pjrt_neuron::engine::remote {
namespace {

constexpr int kMaxSessions = 64;
std::atomic<int> g_session_fds[kMaxSessions];
std::atomic<bool> g_forked_child{false};

void CloseSessionsInChild() {
  g_forked_child = true;
  for (auto& slot : g_session_fds) {
    int fd = slot.exchange(-1);
    if (fd >= 0) close(fd);
  }
}

}  // namespace

int RegisterSession(int fd) {
  static const bool registered = [] {
    for (auto& slot : g_session_fds) slot = -1;
    pthread_atfork(nullptr, nullptr, CloseSessionsInChild);
    return true;
  }();
  (void)registered;
  for (int i = 0; i < kMaxSessions; ++i) {
    int expected = -1;
    if (g_session_fds[i].compare_exchange_strong(expected, fd)) return i;
  }
  return -1;
}

void CloseSession(int slot, int fd) {
  if (slot < 0) {
    close(fd);
  } else if (int held = g_session_fds[slot].exchange(-1); held >= 0) {
    close(held);
  }
}

bool InForkedChild() { return g_forked_child; }

}  // namespace pjrt_neuron::engine::remote
