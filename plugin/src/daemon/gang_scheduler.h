// Gang scheduling of collective executions whose cores span processes: the k-th execution on
// each core waits until every core's k-th has arrived, then all run at once. Waiting is
// bounded, and a process that ends fails its peers at once. Knows no sockets and no engine: what
// a request brings is opaque to it (GangPart), and a runner the caller gives runs the gang.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::daemon {

// What one request brings to a gang (its arguments) and takes from it (its outputs); the
// runner's business. The runner writes it before Join returns to the request that brought it.
class GangPart {
 public:
  virtual ~GangPart() = default;
};

// One request to run a collective program on some of the program's cores.
struct GangArrival {
  int job = 0;                     // the world (job) of the requesting process
  std::string gang_key;            // equal for programs whose executions meet
  std::string program_key;         // equal for the same program
  std::string program_name;        // for messages
  std::vector<int> program_cores;  // every core of the program, in device-assignment order
  std::vector<int> cores;          // this request's; not empty
  int launch_id = 0;               // the framework's
  double timeout_seconds = 300;    // for the other cores to arrive
  std::shared_ptr<GangPart> part;
};

// A gang whose every core has arrived, as the runner gets it.
struct ReadyGang {
  std::vector<int> cores;  // every core of the program, in device-assignment order
  // Every core's process runs the same program: one run over all the cores, of the first
  // arrival's program. Otherwise each core runs its own process's program at the same time,
  // under one launch id, and XLA matches their collectives by channel id.
  bool one_program = true;
  int launch_id = 0;  // the first arrival's when one program; a fresh one when apart
  std::shared_ptr<GangPart> first;                 // the first arrival's part
  std::map<int, std::shared_ptr<GangPart>> parts;  // by core: the part of the request that brought it
};

// Runs a ready gang on the last arrival's thread, without the scheduler's lock.
using GangRunner = std::function<Status(const ReadyGang&)>;
// Whether a live process of `job` holds `core`; called with the scheduler's lock held, so it
// must not call back into the scheduler.
using CoreHolder = std::function<bool(int job, int core)>;

class GangScheduler {
 public:
  explicit GangScheduler(CoreHolder holds_core) : holds_core_(std::move(holds_core)) {}

  // Joins the request to the gang of its program's next execution on its cores; returns once
  // the gang ran (the runner's status) or failed: DEADLINE_EXCEEDED when cores did not arrive
  // in time, ABORTED when a core's process ended or none holds it, FAILED_PRECONDITION when
  // the processes' programs span different cores.
  Status Join(const GangArrival& arrival, const GangRunner& run);

  // Process `process_index` (pid `pid`) of `job`, which held `cores`, has ended: the gangs of
  // its job that wait for those cores fail now, not at their deadline.
  void EndProcess(int job, int process_index, int pid, const std::vector<int>& cores);

  // Every process of the job has ended: its execution counts go, so a job that reuses the
  // daemon starts at 0 whatever collectives this one left unmatched.
  void EndJob(int job);

 private:
  struct Member {
    std::shared_ptr<GangPart> part;
    std::string program_key;
    std::string program_name;
    std::vector<int> program_cores;
  };
  struct Gang {
    int job = 0;
    std::vector<int> cores;  // every core of the program, in device-assignment order
    int launch_id = 0;
    std::shared_ptr<GangPart> first;
    std::map<int, Member> members;  // by core
    bool done = false;
    Status status;
    bool complete() const;
  };
  using GangKey = std::tuple<int, std::string, int64_t>;  // job, gang key, execution number

  // The check that starts a gang's run: what makes it one program or apart, and its launch id.
  Status Prepare(const Gang& gang, ReadyGang* ready);
  void Fail(const GangKey& key, const std::shared_ptr<Gang>& gang, Status status);

  const CoreHolder holds_core_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<GangKey, std::shared_ptr<Gang>> gangs_;
  // Per job: (gang key, first core of the request) -> executions so far.
  std::map<int, std::map<std::pair<std::string, int>, int64_t>> sequence_numbers_;
  int next_launch_id_ = 1 << 30;  // apart from the launch ids frameworks choose
};

}  // namespace pjrt_neuron::daemon
