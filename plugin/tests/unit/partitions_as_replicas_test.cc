// hlo::PartitionsAsReplicas on hand-built modules: what changes (partition-id, the collectives'
// channel ids and global-id flags), what stays byte for byte, and what is refused by name.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hlo/partitions_as_replicas.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

namespace proto = testing::proto;
constexpr uint32_t kUseGlobalDeviceIds = 71;  // HloInstructionProto.use_global_device_ids
constexpr uint32_t kReplicaIds = 1;           // ReplicaGroup.replica_ids

std::string Instruction(const std::string& name, const std::string& opcode, int64_t id, uint64_t channel = 0,
                        bool global_ids = false, const std::vector<std::vector<int>>& groups = {}) {
  std::string out;
  AppendBytesField(&out, proto::kInstructionName, name);
  AppendBytesField(&out, proto::kInstructionOpcode, opcode);
  AppendVarintField(&out, proto::kInstructionId, static_cast<uint64_t>(id));
  if (channel != 0) AppendVarintField(&out, proto::kInstructionChannelId, channel);
  if (global_ids) AppendVarintField(&out, kUseGlobalDeviceIds, 1);
  for (const auto& group : groups) {
    std::string g;
    for (int member : group) AppendVarintField(&g, kReplicaIds, static_cast<uint64_t>(member));
    AppendBytesField(&out, proto::kInstructionReplicaGroups, g);
  }
  return out;
}

std::string Module(const std::vector<std::string>& instructions) {
  std::string computation;
  AppendBytesField(&computation, proto::kComputationName, "main");
  for (const std::string& i : instructions) AppendBytesField(&computation, proto::kComputationInstructions, i);
  std::string module;
  AppendBytesField(&module, proto::kModuleName, "partitioned");
  AppendBytesField(&module, proto::kModuleComputations, computation);
  return module;
}

// Each instruction of the module's computations as field number -> raw fields, by name.
std::map<std::string, std::multimap<uint32_t, std::string>> Instructions(const std::string& module) {
  std::map<std::string, std::multimap<uint32_t, std::string>> out;
  WireReader m(module);
  Field f;
  while (!m.done() && m.Next(&f)) {
    if (f.number != proto::kModuleComputations) continue;
    WireReader c(f.payload);
    Field g;
    while (!c.done() && c.Next(&g)) {
      if (g.number != proto::kComputationInstructions) continue;
      std::multimap<uint32_t, std::string> fields;
      std::string name;
      WireReader i(g.payload);
      Field h;
      while (!i.done() && i.Next(&h)) {
        fields.emplace(h.number, h.raw);
        if (h.number == proto::kInstructionName) name = h.payload;
      }
      out[name] = fields;
    }
  }
  return out;
}

std::string Opcode(const std::multimap<uint32_t, std::string>& fields) {
  auto it = fields.find(proto::kInstructionOpcode);
  WireReader r(it->second);
  Field f;
  r.Next(&f);
  return f.payload;
}

TEST(PartitionsAsReplicas, PartitionIdBecomesReplicaId) {
  auto out = PartitionsAsReplicas(Module({Instruction("pid", "partition-id", 1)}));
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto instructions = Instructions(out.value());
  EXPECT_EQ(Opcode(instructions["pid"]), "replica-id");
  EXPECT_EQ(instructions["pid"].count(proto::kInstructionId), 1u);
}

TEST(PartitionsAsReplicas, CollectivesLoseChannelAndGlobalIdsAndKeepTheirGroups) {
  const std::string cross_partition = Instruction("sum", "all-reduce", 2, /*channel=*/7, false, {{0, 1}});
  const std::string flattened = Instruction("gather", "all-gather", 3, /*channel=*/8, true, {{1, 0}});
  const std::string permute = Instruction("shift", "collective-permute", 4, /*channel=*/9);
  auto out = PartitionsAsReplicas(Module({cross_partition, flattened, permute}));
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto before = Instructions(Module({cross_partition, flattened, permute}));
  auto after = Instructions(out.value());
  for (const char* name : {"sum", "gather", "shift"}) {
    EXPECT_EQ(after[name].count(proto::kInstructionChannelId), 0u) << name;
    EXPECT_EQ(after[name].count(kUseGlobalDeviceIds), 0u) << name;
    auto groups = [](const std::multimap<uint32_t, std::string>& fields) {
      std::vector<std::string> out;
      auto range = fields.equal_range(proto::kInstructionReplicaGroups);
      for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
      return out;
    };
    EXPECT_EQ(groups(after[name]), groups(before[name])) << name;
    EXPECT_EQ(Opcode(after[name]), Opcode(before[name])) << name;
  }
}

TEST(PartitionsAsReplicas, EverythingElseStaysByteForByte) {
  const std::string module = Module({Instruction("p", "parameter", 1), Instruction("done", "all-reduce-done", 2),
                                     Instruction("add", "add", 3)});
  auto out = PartitionsAsReplicas(module);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out.value(), module);
}

TEST(PartitionsAsReplicas, ReplicaIdIsRefusedByName) {
  auto out = PartitionsAsReplicas(Module({Instruction("rid.3", "replica-id", 1)}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kUnimplemented);
  EXPECT_NE(out.status().message().find("'rid.3' asks for the replica id"), std::string::npos)
      << out.status().message();
}

TEST(PartitionsAsReplicas, CrossReplicaCollectiveIsRefusedByName) {
  auto out = PartitionsAsReplicas(Module({Instruction("crs", "all-reduce", 1, /*channel=*/0, false, {{0}})}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kUnimplemented);
  EXPECT_NE(out.status().message().find("'crs' (all-reduce) is cross-replica"), std::string::npos)
      << out.status().message();
}

TEST(PartitionsAsReplicas, MalformedModulesAreInvalidArgumentAndTruncationsNeverCrash) {
  auto out = PartitionsAsReplicas(std::string("\x1a\x7f\x01", 3));  // a computation longer than the bytes
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument);
  const std::string module = Module({Instruction("pid", "partition-id", 1),
                                     Instruction("sum", "all-reduce", 2, 7, true, {{0, 1}})});
  for (size_t n = 0; n < module.size(); ++n) (void)PartitionsAsReplicas(module.substr(0, n));
}

}  // namespace
}  // namespace pjrt_neuron::hlo
