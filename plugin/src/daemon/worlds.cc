// Hello, attach and the end of a session: the job worlds of the instance daemon.
#include "daemon/worlds.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace pjrt_neuron::daemon {

Worlds::Joined Worlds::Hello(const engine::remote::HelloRequest& hello) {
  auto session = std::make_shared<Session>();
  session->pid = hello.pid;
  session->process_index = hello.process_index;
  session->world_size = hello.world_size;
  session->cores = hello.cores;
  Session* s = session.get();
  Joined joined;
  joined.session = session;
  std::unique_lock<std::mutex> lock(mutex_);
  s->id = next_session_++;
  sessions_[s->id] = session;
  World* world = nullptr;
  for (auto& [id, w] : worlds_) {
    if (!w->formed && w->size == s->world_size && w->members.count(s->process_index) == 0) {
      world = w.get();
      break;
    }
  }
  if (world == nullptr) {
    auto w = std::make_unique<World>();
    w->id = next_world_++;
    w->size = s->world_size;
    world = w.get();
    worlds_[w->id] = std::move(w);
  }
  world->members[s->process_index] = s;
  s->world = world->id;
  if (world->complete()) world->formed = true;
  changed_.notify_all();
  const double timeout = hello.timeout_seconds;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  while (!world->formed && s->alive) {
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !world->formed) {
      std::string missing;
      for (int i = 0; i < world->size; ++i) {
        if (world->members.count(i) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      }
      world->members.erase(s->process_index);
      s->world = -1;  // left the world already; its session end must not touch it again
      s->alive = false;
      joined.status = Status(ErrorCode::kDeadlineExceeded,
                             "process(es) " + missing + " of " + std::to_string(world->size) +
                                 " never attached to the NeuronCores within " + std::to_string(int(timeout)) +
                                 " s (PJRT_NEURON_COLLECTIVE_TIMEOUT); check that every rank started, on this "
                                 "host and with the same PJRT_NEURON_LOCK_DIR (a simulated instance is one host)");
      return joined;
    }
  }
  for (auto& [index, member] : world->members) {
    joined.world.push_back(engine::JobMember{index, member->pid, member->cores});
  }
  return joined;
}

StatusOr<std::shared_ptr<Session>> Worlds::Attach(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second->alive) return FailedPrecondition("no live session " + std::to_string(id));
  return it->second;
}

void Worlds::EndSession(const std::shared_ptr<Session>& s) {
  int job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s->alive = false;
    job = s->world;
  }
  // Peers waiting for this process in a collective fail now instead of at their deadline.
  if (job >= 0) gangs_.EndProcess(job, s->process_index, s->pid, s->cores);
  s->objects.Clear();
  bool job_ended = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto world = worlds_.find(s->world);
    if (world != worlds_.end()) {
      auto member = world->second->members.find(s->process_index);
      if (member != world->second->members.end() && member->second == s.get()) world->second->members.erase(member);
      if (world->second->members.empty()) {
        worlds_.erase(world);
        job_ended = true;
      }
    }
    changed_.notify_all();
    sessions_.erase(s->id);
  }
  if (job_ended) gangs_.EndJob(job);
}

bool Worlds::HoldsCore(int job, int core) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto world = worlds_.find(job);
  if (world == worlds_.end()) return false;
  for (auto& [index, member] : world->second->members) {
    if (member->alive && std::find(member->cores.begin(), member->cores.end(), core) != member->cores.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace pjrt_neuron::daemon
