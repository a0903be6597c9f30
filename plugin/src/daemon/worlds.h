// Sessions and job worlds: a process's hello makes a session and puts it in the world of its
// job, which forms once every process of the job has said hello; further connections attach
// to the session; the end of a session fails its peers' waiting gangs and, with the job's last
// one, ends the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "daemon/gang_scheduler.h"
#include "daemon/session_objects.h"
#include "engine/engine.h"
#include "engine/remote/protocol.h"

namespace pjrt_neuron::daemon {

// One framework process, from its hello until its first connection closes.
struct Session {
  int64_t id = 0;
  int pid = 0;
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;
  SessionObjects objects;
  bool alive = true;  // guarded by the Worlds' lock
  // The job's world, or -1 once it left it; written under the Worlds' lock, read by requests.
  std::atomic<int> world{-1};
};

class Worlds {
 public:
  explicit Worlds(GangScheduler& gangs) : gangs_(gangs) {}

  struct Joined {
    std::shared_ptr<Session> session;  // null when none was made
    Status status;                     // failed when the world did not form in time
    std::vector<engine::JobMember> world;  // by process index, when it formed
  };
  // Joins the first forming world of the hello's size that lacks its process index (or a new
  // one) and waits until the world has formed. A session made here ends with EndSession.
  Joined Hello(const engine::remote::HelloRequest& hello);

  // The live session `id`, for a further connection of its process.
  StatusOr<std::shared_ptr<Session>> Attach(int64_t id);

  // The session's process closed its first connection (or exited): what it held goes.
  void EndSession(const std::shared_ptr<Session>& session);

  // Whether a live process of world `job` holds `core`.
  bool HoldsCore(int job, int core);

 private:
  struct World {
    int id = 0;
    int size = 0;
    std::map<int, Session*> members;  // by process index
    bool complete() const { return static_cast<int>(members.size()) == size; }
    // Once every process has attached, the world takes no one else, even after members leave:
    // a new job's process must not join the one that is ending.
    bool formed = false;
  };

  GangScheduler& gangs_;  // locked before this, never while this is locked
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t next_session_ = 1;
  int next_world_ = 1;
  std::map<int64_t, std::shared_ptr<Session>> sessions_;
  std::map<int, std::unique_ptr<World>> worlds_;
};

}  // namespace pjrt_neuron::daemon
