// Matching the k-th executions of a collective program on each core, and failing them in time.
#include "daemon/gang_scheduler.h"

#include <algorithm>
#include <chrono>

#include "daemon/core_list.h"

namespace pjrt_neuron::daemon {

using Clock = std::chrono::steady_clock;

bool GangScheduler::Gang::complete() const {
  return std::all_of(cores.begin(), cores.end(), [&](int core) { return members.count(core) != 0; });
}

void GangScheduler::Fail(const GangKey& key, const std::shared_ptr<Gang>& gang, Status status) {
  gang->done = true;
  gang->status = std::move(status);
  gang->members.clear();  // its arguments go with it
  auto it = gangs_.find(key);
  if (it != gangs_.end() && it->second == gang) gangs_.erase(it);
  changed_.notify_all();
}

Status GangScheduler::Prepare(const Gang& gang, ReadyGang* ready) {
  ready->cores = gang.cores;
  ready->first = gang.first;
  ready->one_program = true;
  for (const auto& [core, member] : gang.members) {
    ready->parts[core] = member.part;
    ready->one_program = ready->one_program && member.program_key == gang.members.begin()->second.program_key;
  }
  ready->launch_id = gang.launch_id;
  if (ready->one_program) return Status::Ok();
  ready->launch_id = next_launch_id_++;  // the run id that makes their collectives meet
  for (const auto& [core, member] : gang.members) {
    if (member.program_cores != gang.cores) {
      return FailedPrecondition("the processes of this job ran different collective programs ('" +
                                member.program_name + "' on NeuronCore " + std::to_string(core) + " spans cores " +
                                CoreList(member.program_cores) + ", the others span " + CoreList(gang.cores) + ")");
    }
  }
  return Status::Ok();
}

Status GangScheduler::Join(const GangArrival& arrival, const GangRunner& run) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Counted per job: a job that starts on a daemon an earlier job used begins at 0, whatever
  // collectives the earlier one left unmatched.
  const int64_t sequence = sequence_numbers_[arrival.job][{arrival.gang_key, arrival.cores.front()}]++;
  const GangKey key{arrival.job, arrival.gang_key, sequence};
  auto& slot = gangs_[key];
  if (!slot) {
    slot = std::make_shared<Gang>();
    slot->job = arrival.job;
    slot->cores = arrival.program_cores;
    slot->launch_id = arrival.launch_id;
    slot->first = arrival.part;
  }
  std::shared_ptr<Gang> gang = slot;
  if (!gang->done) {
    // A core whose process has already left can never join: fail now, not at the deadline.
    for (int core : gang->cores) {
      bool brought = std::find(arrival.cores.begin(), arrival.cores.end(), core) != arrival.cores.end();
      if (brought || holds_core_(arrival.job, core)) continue;
      Fail(key, gang,
           Status(ErrorCode::kAborted, "collective program '" + arrival.program_name + "' needs NeuronCore " +
                                           std::to_string(core) +
                                           ", but no live process of this job holds it (its process exited or "
                                           "never attached)"));
      break;
    }
  }
  if (!gang->done) {
    for (int core : arrival.cores) {
      gang->members[core] = Member{arrival.part, arrival.program_key, arrival.program_name, arrival.program_cores};
    }
  }
  if (!gang->done && gang->complete()) {
    gangs_.erase(key);
    ReadyGang ready;
    Status status = Prepare(*gang, &ready);
    lock.unlock();
    if (status.ok()) status = run(ready);
    lock.lock();
    gang->status = status;
    gang->done = true;
    changed_.notify_all();
  } else {
    auto deadline = Clock::now() + std::chrono::duration<double>(arrival.timeout_seconds);
    while (!gang->done) {
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !gang->done) {
        std::vector<int> missing;
        for (int core : gang->cores) {
          if (gang->members.count(core) == 0) missing.push_back(core);
        }
        Fail(key, gang,
             Status(ErrorCode::kDeadlineExceeded,
                    "collective program '" + arrival.program_name + "' (execution #" + std::to_string(sequence) +
                        ") waited " + std::to_string(int(arrival.timeout_seconds)) + " s for NeuronCore(s) " +
                        CoreList(missing) + " to join; their process(es) never ran it (PJRT_NEURON_COLLECTIVE_TIMEOUT)"));
      }
    }
  }
  return gang->status;
}

void GangScheduler::EndProcess(int job, int process_index, int pid, const std::vector<int>& cores) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Later arrivals find its cores unheld and fail too (Join), so the gangs can go.
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    const GangKey key = it->first;
    std::shared_ptr<Gang> gang = it->second;
    ++it;  // Fail erases the gang
    bool involved = std::any_of(gang->cores.begin(), gang->cores.end(), [&](int core) {
      return std::find(cores.begin(), cores.end(), core) != cores.end();
    });
    if (gang->job != job || !involved || gang->done) continue;
    Fail(key, gang,
         Status(ErrorCode::kAborted, "process " + std::to_string(process_index) + " (pid " + std::to_string(pid) +
                                         ", NeuronCore(s) " + CoreList(cores) +
                                         ") exited before joining this collective execution"));
  }
}

void GangScheduler::EndJob(int job) {
  std::lock_guard<std::mutex> lock(mutex_);
  sequence_numbers_.erase(job);
}

}  // namespace pjrt_neuron::daemon
