// Gang scheduling without sockets or an engine: which executions meet, when they fail, and how
// a ready gang is handed to its runner.
#include "daemon/gang_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace pjrt_neuron::daemon {
namespace {

// What a request brings in these tests: which of its process's executions it is, and what the
// runner saw of the gang.
struct TestPart : GangPart {
  explicit TestPart(int execution = 0) : execution(execution) {}
  int execution;
  std::vector<int> executions_run_with;  // the executions of every part of the gang
  int launch_id = -1;
  bool one_program = false;
};

// Which (job, core) pairs a live process holds; tells the test when the scheduler asks.
class Holders {
 public:
  explicit Holders(std::set<std::pair<int, int>> held) : held_(std::move(held)) {}
  CoreHolder Holder() {
    return [this](int job, int core) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++asked_;
      return held_.count({job, core}) != 0;
    };
  }
  void Drop(int job, int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.erase({job, core});
  }
  int asked() {
    std::lock_guard<std::mutex> lock(mutex_);
    return asked_;
  }

 private:
  std::mutex mutex_;
  std::set<std::pair<int, int>> held_;
  int asked_ = 0;
};

GangArrival Arrival(int job, std::vector<int> cores, std::shared_ptr<TestPart> part, double timeout = 30,
                    std::vector<int> program_cores = {0, 1}, std::string program_key = "program") {
  GangArrival arrival;
  arrival.job = job;
  arrival.gang_key = "gang";
  arrival.program_key = std::move(program_key);
  arrival.program_name = "main";
  arrival.program_cores = std::move(program_cores);
  arrival.cores = std::move(cores);
  arrival.launch_id = 7;
  arrival.timeout_seconds = timeout;
  arrival.part = std::move(part);
  return arrival;
}

// Records the gang on every part, as a real runner writes each request's outputs.
Status RecordGang(const ReadyGang& gang) {
  std::vector<int> executions;
  for (int core : gang.cores) executions.push_back(static_cast<TestPart&>(*gang.parts.at(core)).execution);
  for (auto& [core, part] : gang.parts) {
    auto& p = static_cast<TestPart&>(*part);
    p.executions_run_with = executions;
    p.launch_id = gang.launch_id;
    p.one_program = gang.one_program;
  }
  return Status::Ok();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(GangScheduler, TheKthExecutionOfEachCoreMeetsTheOthersKth) {
  Holders holders({{1, 0}, {1, 1}, {1, 2}});
  GangScheduler gangs(holders.Holder());
  constexpr int kExecutions = 6;
  std::atomic<int> runs{0};
  auto run = [&](const ReadyGang& gang) {
    ++runs;
    return RecordGang(gang);
  };
  std::vector<std::vector<std::shared_ptr<TestPart>>> parts(3);
  std::vector<std::thread> processes;
  for (int core = 0; core < 3; ++core) {
    processes.emplace_back([&, core] {
      for (int k = 0; k < kExecutions; ++k) {
        // Arrive in a different order each time.
        std::this_thread::sleep_for(std::chrono::milliseconds((core * 7 + k * 3) % 5));
        auto part = std::make_shared<TestPart>(k);
        parts[core].push_back(part);
        Status status = gangs.Join(Arrival(1, {core}, part, 30, {0, 1, 2}), run);
        EXPECT_TRUE(status.ok()) << status.message();
      }
    });
  }
  for (auto& p : processes) p.join();
  EXPECT_EQ(runs.load(), kExecutions);
  for (int core = 0; core < 3; ++core) {
    for (int k = 0; k < kExecutions; ++k) {
      EXPECT_EQ(parts[core][k]->executions_run_with, (std::vector<int>{k, k, k})) << "core " << core << " #" << k;
      EXPECT_TRUE(parts[core][k]->one_program);
      EXPECT_EQ(parts[core][k]->launch_id, 7);  // the framework's own, for one program
    }
  }
}

TEST(GangScheduler, ARequestOfSeveralCoresCompletesTheGangWithTheOthers) {
  Holders holders({{1, 0}, {1, 1}, {1, 2}, {1, 3}});
  GangScheduler gangs(holders.Holder());
  auto first = std::make_shared<TestPart>(0);
  auto second = std::make_shared<TestPart>(1);
  std::thread other([&] { EXPECT_TRUE(gangs.Join(Arrival(1, {2, 3}, second, 30, {0, 1, 2, 3}), RecordGang).ok()); });
  EXPECT_TRUE(gangs.Join(Arrival(1, {0, 1}, first, 30, {0, 1, 2, 3}), RecordGang).ok());
  other.join();
  EXPECT_EQ(first->executions_run_with, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(second->executions_run_with, first->executions_run_with);
}

TEST(GangScheduler, AMissingCoreTimesOutNamingIt) {
  Holders holders({{1, 0}, {1, 1}, {1, 2}});
  GangScheduler gangs(holders.Holder());
  bool ran = false;
  auto start = std::chrono::steady_clock::now();
  Status status = gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 1, {0, 1, 2}), [&](const ReadyGang&) {
    ran = true;
    return Status::Ok();
  });
  EXPECT_GE(SecondsSince(start), 0.9);
  EXPECT_FALSE(ran);
  EXPECT_EQ(status.code(), ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(),
            "collective program 'main' (execution #0) waited 1 s for NeuronCore(s) 1,2 to join; their process(es) "
            "never ran it (PJRT_NEURON_COLLECTIVE_TIMEOUT)");
}

TEST(GangScheduler, TheEndOfAPeersSessionAbortsTheGangWaitingForIt) {
  Holders holders({{1, 0}, {1, 1}});
  GangScheduler gangs(holders.Holder());
  auto start = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 60), RecordGang);
  });
  // The scheduler asks who holds core 1 with its lock held, and keeps it until the request
  // waits; the end of the process takes that lock, so it comes after.
  while (holders.asked() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  holders.Drop(1, 1);
  gangs.EndProcess(1, 1, 4242, {1});
  Status status = waiting.get();
  EXPECT_LT(SecondsSince(start), 30);
  EXPECT_EQ(status.code(), ErrorCode::kAborted);
  EXPECT_EQ(status.message(), "process 1 (pid 4242, NeuronCore(s) 1) exited before joining this collective execution");
}

TEST(GangScheduler, TheEndOfAProcessOfAnotherJobLeavesTheGangWaiting) {
  Holders holders({{1, 0}, {1, 1}});
  GangScheduler gangs(holders.Holder());
  auto first = std::make_shared<TestPart>(0);
  auto waiting = std::async(std::launch::async, [&] { return gangs.Join(Arrival(1, {0}, first, 60), RecordGang); });
  while (holders.asked() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gangs.EndProcess(2, 1, 4242, {1});  // an ending job that held core 1 before this one
  EXPECT_TRUE(gangs.Join(Arrival(1, {1}, std::make_shared<TestPart>(0)), RecordGang).ok());
  EXPECT_TRUE(waiting.get().ok());
  EXPECT_EQ(first->executions_run_with, (std::vector<int>{0, 0}));
}

TEST(GangScheduler, ACoreNoLiveProcessHoldsFailsAtOnce) {
  Holders holders(std::set<std::pair<int, int>>{{1, 0}});
  GangScheduler gangs(holders.Holder());
  auto start = std::chrono::steady_clock::now();
  Status status = gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 60), RecordGang);
  EXPECT_LT(SecondsSince(start), 30);
  EXPECT_EQ(status.code(), ErrorCode::kAborted);
  EXPECT_EQ(status.message(),
            "collective program 'main' needs NeuronCore 1, but no live process of this job holds it (its process "
            "exited or never attached)");
}

TEST(GangScheduler, ProgramsThatDifferRunApartUnderOneFreshLaunchId) {
  Holders holders({{1, 0}, {1, 1}});
  GangScheduler gangs(holders.Holder());
  std::vector<int> launch_ids;
  for (int k = 0; k < 2; ++k) {
    auto rank0 = std::make_shared<TestPart>(k);
    auto rank1 = std::make_shared<TestPart>(k);
    std::thread other([&] {
      EXPECT_TRUE(gangs.Join(Arrival(1, {1}, rank1, 30, {0, 1}, "rank 1's program"), RecordGang).ok());
    });
    EXPECT_TRUE(gangs.Join(Arrival(1, {0}, rank0, 30, {0, 1}, "rank 0's program"), RecordGang).ok());
    other.join();
    EXPECT_FALSE(rank0->one_program);
    EXPECT_EQ(rank0->launch_id, rank1->launch_id);
    EXPECT_GE(rank0->launch_id, 1 << 30);  // apart from the ids frameworks choose
    launch_ids.push_back(rank0->launch_id);
  }
  EXPECT_NE(launch_ids[0], launch_ids[1]);
}

TEST(GangScheduler, DifferentProgramsThatSpanDifferentCoresFailNamingThem) {
  Holders holders({{1, 0}, {1, 1}, {1, 2}});
  GangScheduler gangs(holders.Holder());
  bool ran = false;
  auto run = [&](const ReadyGang&) {
    ran = true;
    return Status::Ok();
  };
  // Core 0's request comes first, so the gang is of its program's cores, 0 and 1.
  auto mine = std::async(std::launch::async, [&] {
    return gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 30, {0, 1}, "mine"), run);
  });
  while (holders.asked() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Status other_status = gangs.Join(Arrival(1, {1}, std::make_shared<TestPart>(), 30, {1, 0, 2}, "other"), run);
  Status status = mine.get();
  EXPECT_FALSE(ran);
  EXPECT_EQ(status.code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(other_status.message(), status.message());
  EXPECT_NE(status.message().find("the processes of this job ran different collective programs ('main' on NeuronCore 1 "
                                  "spans cores 1,0,2, the others span 0,1)"),
            std::string::npos)
      << status.message();
}

TEST(GangScheduler, TheRunnersFailureReachesEveryMember) {
  Holders holders({{1, 0}, {1, 1}});
  GangScheduler gangs(holders.Holder());
  auto fail = [](const ReadyGang&) { return Status(ErrorCode::kInternal, "the engine failed"); };
  auto other = std::async(std::launch::async, [&] { return gangs.Join(Arrival(1, {1}, std::make_shared<TestPart>()), fail); });
  Status status = gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>()), fail);
  EXPECT_EQ(status.message(), "the engine failed");
  EXPECT_EQ(other.get().message(), "the engine failed");
}

TEST(GangScheduler, ExecutionsAreCountedPerJob) {
  Holders holders({{1, 0}, {1, 1}, {2, 0}, {2, 1}});
  GangScheduler gangs(holders.Holder());
  // Job 1's rank 0 runs a collective that rank 1 never runs: its execution #0 on core 0 times out.
  EXPECT_EQ(gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 0.2), RecordGang).code(),
            ErrorCode::kDeadlineExceeded);

  // Within job 1 the counts now differ: core 0's next is #1, core 1's first is #0; they miss.
  auto skewed = std::async(std::launch::async, [&] {
    return gangs.Join(Arrival(1, {1}, std::make_shared<TestPart>(), 0.5), RecordGang);
  });
  EXPECT_EQ(gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>(), 0.5), RecordGang).code(),
            ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(skewed.get().code(), ErrorCode::kDeadlineExceeded);

  // A new job on the same cores starts at #0 on each: its executions meet.
  auto rank1 = std::make_shared<TestPart>(1);
  auto other = std::async(std::launch::async, [&] { return gangs.Join(Arrival(2, {1}, rank1, 30), RecordGang); });
  auto rank0 = std::make_shared<TestPart>(0);
  EXPECT_TRUE(gangs.Join(Arrival(2, {0}, rank0, 30), RecordGang).ok());
  EXPECT_TRUE(other.get().ok());
  EXPECT_EQ(rank0->executions_run_with, (std::vector<int>{0, 1}));

  // Once job 1 ends its counts go, so an id used again starts at #0 too.
  gangs.EndJob(1);
  auto again = std::async(std::launch::async, [&] { return gangs.Join(Arrival(1, {1}, std::make_shared<TestPart>()), RecordGang); });
  EXPECT_TRUE(gangs.Join(Arrival(1, {0}, std::make_shared<TestPart>()), RecordGang).ok());
  EXPECT_TRUE(again.get().ok());
}

}  // namespace
}  // namespace pjrt_neuron::daemon
