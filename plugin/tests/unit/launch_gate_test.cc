// core::LaunchGate: one-core launches of a collective program meet, or fail in time by name.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/launch_gate.h"

namespace pjrt_neuron::core {
namespace {

TEST(LaunchGate, EveryCoreArrivingOpensTheGateForAll) {
  LaunchGate gate;
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  for (int core = 0; core < 3; ++core) {
    threads.emplace_back([&, core] { results[core] = gate.Arrive(core, 7, {0, 1, 2}, 30, "p"); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.message();
}

TEST(LaunchGate, ALaunchAloneFailsNamingTheMissingCoresAndALateOneGetsTheSameStatus) {
  LaunchGate gate;
  Status alone = gate.Arrive(0, 1, {0, 1, 2}, 0.05, "prog");
  EXPECT_EQ(alone.code(), ErrorCode::kDeadlineExceeded);
  EXPECT_NE(alone.message().find("'prog'"), std::string::npos) << alone.message();
  EXPECT_NE(alone.message().find("NeuronCore(s) 1, 2 did not launch it within 0.05 s"), std::string::npos)
      << alone.message();
  Status late = gate.Arrive(1, 1, {0, 1, 2}, 30, "prog");
  EXPECT_EQ(late.code(), ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(late.message(), alone.message());
}

TEST(LaunchGate, ExecutionsAreMatchedInOrderPerLaunchId) {
  LaunchGate gate;
  // Core 0's first execution under id 3 gives up; its second meets core 1's second.
  EXPECT_FALSE(gate.Arrive(0, 3, {0, 1}, 0.01, "p").ok());
  EXPECT_FALSE(gate.Arrive(1, 3, {0, 1}, 30, "p").ok());  // the first, late
  Status second;
  std::thread other([&] { second = gate.Arrive(1, 3, {0, 1}, 30, "p"); });
  EXPECT_TRUE(gate.Arrive(0, 3, {0, 1}, 30, "p").ok());
  other.join();
  EXPECT_TRUE(second.ok()) << second.message();
  // Another launch id is another sequence.
  std::thread a([&] { EXPECT_TRUE(gate.Arrive(0, 4, {0, 1}, 30, "p").ok()); });
  EXPECT_TRUE(gate.Arrive(1, 4, {0, 1}, 30, "p").ok());
  a.join();
}

}  // namespace
}  // namespace pjrt_neuron::core
