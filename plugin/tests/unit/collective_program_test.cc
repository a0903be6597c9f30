// WithCollectiveChannels and CollectiveSignature (hlo/collective_program.h), on torch-xla's
// own programs (data/torch_*.pb: xm.all_gather as two ranks lower it, and one of each
// collective) and on modules built here for the edges.
#include "hlo/collective_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hlo/wire_format.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

using namespace testing;  // NOLINT: the test helpers

constexpr uint64_t kFirstAddedChannel = uint64_t{1} << 40;  // collective_program.cc: far above frameworks' ids

const TestComputation& Entry(const std::vector<TestComputation>& computations) {
  return computations.back();  // XLA and torch-xla write the entry computation last
}

const TestInstruction* Find(const TestComputation& c, const std::string& name) {
  for (const TestInstruction& i : c.instructions) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

std::vector<const TestInstruction*> WithOpcode(const std::vector<TestComputation>& computations,
                                               const std::string& opcode) {
  std::vector<const TestInstruction*> out;
  for (const TestComputation& c : computations) {
    for (const TestInstruction& i : c.instructions) {
      if (i.opcode == opcode) out.push_back(&i);
    }
  }
  return out;
}

// Each operand is an instruction before its user in the same computation, ids are unique in
// the computation, and the root exists.
void ExpectWellFormed(const std::vector<TestComputation>& computations) {
  for (const TestComputation& c : computations) {
    std::set<int64_t> defined;
    for (const TestInstruction& i : c.instructions) {
      for (int64_t operand : i.operand_ids) {
        EXPECT_TRUE(defined.count(operand)) << i.name << " uses " << operand << " before it is defined";
      }
      EXPECT_TRUE(defined.insert(i.id).second) << "id " << i.id << " twice in computation " << c.id;
    }
    EXPECT_TRUE(defined.count(c.root_id)) << "root " << c.root_id << " of computation " << c.id;
  }
}

std::string Groups(std::initializer_list<int64_t> replicas) {
  std::string group, ids;
  for (int64_t r : replicas) AppendVarint(&ids, static_cast<uint64_t>(r));
  AppendBytesField(&group, 1, ids);  // ReplicaGroup.replica_ids
  std::string field;
  AppendBytesField(&field, proto::kInstructionReplicaGroups, group);
  return field;
}

std::string ChannelId(uint64_t id) {
  std::string field;
  AppendVarintField(&field, proto::kInstructionChannelId, id);
  return field;
}

// param -> collective(opcode, shape) -> root, with an add computation for reductions.
std::string OneCollective(const std::string& opcode, const std::string& shape, const std::string& extra = "") {
  const std::string f32 = ArrayShape(kF32, {4});
  std::string to_apply;
  AppendVarintField(&to_apply, proto::kInstructionCalledComputationIds, 1);
  const std::string add = MakeComputation(1, {MakeInstruction(1, "parameter", ArrayShape(kF32, {})),
                                              MakeInstruction(2, "parameter", ArrayShape(kF32, {})),
                                              MakeInstruction(3, "add", ArrayShape(kF32, {}), {1, 2})}, 3);
  const std::string entry = MakeComputation(
      2, {MakeInstruction(1, "parameter", f32), MakeInstruction(2, opcode, shape, {1}, to_apply + extra),
          MakeInstruction(3, "negate", shape, {2})}, 3);
  return MakeModule({add, entry});
}

// ---------------------------------------------------------------- WithCollectiveChannels

TEST(WithCollectiveChannels, SplitsTupleAllReducePerElement) {
  // torch-xla's xm.all_gather: the padded slice and the collective token in one pinned,
  // tuple-shaped all-reduce, no channel id.
  const std::string module = ReadTestData("torch_gather_rank0.pb");
  const std::vector<TestComputation> before = ReadModule(module);
  const TestInstruction* original = Find(Entry(before), "all-reduce.12");
  ASSERT_NE(original, nullptr);
  ASSERT_EQ(original->channel_id, 0u);
  ASSERT_TRUE(original->constrain_layout);
  ASSERT_EQ(ElementType(original->shape), kTuple);
  const std::vector<std::string> element_shapes = TupleElements(original->shape);
  ASSERT_EQ(element_shapes.size(), 2u);
  ASSERT_EQ(original->operand_ids.size(), 2u);
  int64_t largest_id = 0;
  for (const TestInstruction& i : Entry(before).instructions) largest_id = std::max(largest_id, i.id);

  const std::string rewritten = WithCollectiveChannels(module);
  ASSERT_NE(rewritten, module);
  const std::vector<TestComputation> after = ReadModule(rewritten);
  ExpectWellFormed(after);
  ASSERT_EQ(after.size(), before.size());
  const TestComputation& entry = Entry(after);
  ASSERT_EQ(entry.instructions.size(), Entry(before).instructions.size() + 2);

  // In place of the all-reduce: one per element, then a tuple of them under its name and id.
  size_t at = 0;
  while (at < entry.instructions.size() && entry.instructions[at].name != "all-reduce.12.channel0") ++at;
  ASSERT_LT(at + 2, entry.instructions.size());
  for (size_t k = 0; k < 2; ++k) {
    const TestInstruction& element = entry.instructions[at + k];
    SCOPED_TRACE(element.name);
    EXPECT_EQ(element.name, "all-reduce.12.channel" + std::to_string(k));
    EXPECT_EQ(element.opcode, "all-reduce");
    EXPECT_EQ(element.shape, element_shapes[k]);
    EXPECT_EQ(element.operand_ids, std::vector<int64_t>{original->operand_ids[k]});
    EXPECT_EQ(element.channel_id, kFirstAddedChannel + k);
    EXPECT_FALSE(element.constrain_layout);
    EXPECT_EQ(element.id, largest_id + 1 + static_cast<int64_t>(k));  // new ids follow the largest
    EXPECT_EQ(element.called_computation_ids, original->called_computation_ids);  // to_apply kept
    EXPECT_EQ(element.replica_groups, original->replica_groups);
  }
  const TestInstruction& tuple = entry.instructions[at + 2];
  EXPECT_EQ(tuple.name, "all-reduce.12");
  EXPECT_EQ(tuple.opcode, "tuple");
  EXPECT_EQ(tuple.id, original->id);
  EXPECT_EQ(tuple.shape, original->shape);
  EXPECT_EQ(tuple.operand_ids, (std::vector<int64_t>{largest_id + 1, largest_id + 2}));
  EXPECT_EQ(tuple.channel_id, 0u);

  // Everything else as it was: the users still find a value of the same shape under the id.
  std::map<int64_t, std::string> shape_before, shape_after;
  for (const TestInstruction& i : Entry(before).instructions) shape_before[i.id] = i.shape;
  for (const TestInstruction& i : entry.instructions) shape_after[i.id] = i.shape;
  for (const TestInstruction& i : Entry(before).instructions) {
    if (i.name == "all-reduce.12") continue;
    const TestInstruction* kept = Find(entry, i.name);
    ASSERT_NE(kept, nullptr) << i.name;
    EXPECT_EQ(kept->id, i.id);
    EXPECT_EQ(kept->opcode, i.opcode);
    EXPECT_EQ(kept->shape, i.shape);
    EXPECT_EQ(kept->operand_ids, i.operand_ids);
    for (int64_t operand : i.operand_ids) EXPECT_EQ(shape_after[operand], shape_before[operand]) << i.name;
  }
  EXPECT_EQ(entry.root_id, Entry(before).root_id);
  EXPECT_EQ(shape_after[entry.root_id], shape_before[entry.root_id]);
  // The reduction computation is untouched.
  EXPECT_EQ(after.front().instructions.size(), before.front().instructions.size());
}

TEST(WithCollectiveChannels, NumbersCollectivesInProgramOrder) {
  // torch-xla: a coalesced all-reduce of three (a tuple), an all-gather, a reduce-scatter, and
  // an all-gather that has channel 7 already.
  const std::string module = ReadTestData("torch_collectives.pb");
  const std::vector<TestComputation> before = ReadModule(module);
  ASSERT_EQ(WithOpcode(before, "all-reduce").size(), 1u);
  ASSERT_EQ(WithOpcode(before, "all-gather").size(), 2u);
  ASSERT_EQ(WithOpcode(before, "reduce-scatter").size(), 1u);

  const std::vector<TestComputation> after = ReadModule(WithCollectiveChannels(module));
  ExpectWellFormed(after);
  std::vector<std::string> order;
  std::vector<uint64_t> channels;
  for (const TestInstruction& i : Entry(after).instructions) {
    if (i.opcode != "all-reduce" && i.opcode != "all-gather" && i.opcode != "reduce-scatter") continue;
    order.push_back(i.opcode);
    channels.push_back(i.channel_id);
    EXPECT_NE(ElementType(i.shape), kTuple) << i.name << ": a tuple-shaped collective is left";
    EXPECT_FALSE(i.constrain_layout) << i.name;
  }
  EXPECT_EQ(order, (std::vector<std::string>{"all-reduce", "all-reduce", "all-reduce", "all-gather", "reduce-scatter",
                                             "all-gather"}));
  EXPECT_EQ(channels, (std::vector<uint64_t>{kFirstAddedChannel, kFirstAddedChannel + 1, kFirstAddedChannel + 2,
                                             kFirstAddedChannel + 3, kFirstAddedChannel + 4, 7}));
}

TEST(WithCollectiveChannels, LeavesExistingChannelIds) {
  const std::string module = ReadTestData("torch_collectives.pb");
  const TestInstruction* channeled = nullptr;
  const std::vector<TestComputation> before = ReadModule(module);
  for (const TestInstruction* i : WithOpcode(before, "all-gather")) {
    if (i->channel_id == 7) channeled = i;
  }
  ASSERT_NE(channeled, nullptr);
  const std::vector<TestComputation> after = ReadModule(WithCollectiveChannels(module));
  const TestInstruction* kept = Find(Entry(after), channeled->name);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->channel_id, 7u);
  EXPECT_EQ(kept->id, channeled->id);
  EXPECT_EQ(kept->replica_groups, channeled->replica_groups);
}

TEST(WithCollectiveChannels, UnchangedWhenEveryCollectiveHasAChannel) {
  const std::string module = OneCollective("all-reduce", ArrayShape(kF32, {4}), ChannelId(3));
  EXPECT_EQ(WithCollectiveChannels(module), module);
  // JAX's SPMD programs: XLA gave the all-reduce its channel.
  const std::string spmd = UnwrapConfig(ReadTestData("jax_psum_spmd.pb"));
  ASSERT_EQ(WithOpcode(ReadModule(spmd), "all-reduce").size(), 1u);
  EXPECT_EQ(WithCollectiveChannels(spmd), spmd);
}

TEST(WithCollectiveChannels, UnchangedWithoutCollectives) {
  const std::string module = UnwrapConfig(ReadTestData("jax_mlp.pb"));
  EXPECT_EQ(WithCollectiveChannels(module), module);
  EXPECT_EQ(WithCollectiveChannels(""), "");
}

TEST(WithCollectiveChannels, OnlyReplicaCollectivesThatKeepTheirMeaning) {
  // A channel would make these cross-partition: they stay as they are.
  for (const char* opcode : {"all-to-all", "collective-permute", "collective-broadcast"}) {
    const std::string module = OneCollective(opcode, ArrayShape(kF32, {4}));
    EXPECT_EQ(WithCollectiveChannels(module), module) << opcode;
  }
}

TEST(WithCollectiveChannels, ArrayShapedCollectiveGetsAChannelInPlace) {
  for (const char* opcode : {"all-reduce", "all-gather", "reduce-scatter"}) {
    SCOPED_TRACE(opcode);
    std::string pinned = Groups({0, 1});
    AppendVarintField(&pinned, proto::kInstructionConstrainLayout, 1);
    const std::string module = OneCollective(opcode, ArrayShape(kF32, {4}), pinned);
    const std::vector<TestComputation> after = ReadModule(WithCollectiveChannels(module));
    ExpectWellFormed(after);
    ASSERT_EQ(Entry(after).instructions.size(), 3u);
    const TestInstruction& collective = Entry(after).instructions[1];
    EXPECT_EQ(collective.opcode, opcode);
    EXPECT_EQ(collective.id, 2);
    EXPECT_EQ(collective.channel_id, kFirstAddedChannel);
    EXPECT_FALSE(collective.constrain_layout);
    EXPECT_EQ(collective.replica_groups, Groups({0, 1}));
    EXPECT_EQ(collective.operand_ids, std::vector<int64_t>{1});
  }
}

TEST(WithCollectiveChannels, TupleShapeWithoutOneOperandPerElementStaysWhole) {
  // A tuple-shaped result over one operand cannot be split per element.
  const std::string pair = TupleShape({ArrayShape(kF32, {4}), ArrayShape(kF32, {4})});
  const std::string module = OneCollective("all-gather", pair);
  const std::vector<TestComputation> after = ReadModule(WithCollectiveChannels(module));
  ASSERT_EQ(Entry(after).instructions.size(), 3u);
  EXPECT_EQ(Entry(after).instructions[1].opcode, "all-gather");
  EXPECT_EQ(Entry(after).instructions[1].shape, pair);
  EXPECT_EQ(Entry(after).instructions[1].channel_id, kFirstAddedChannel);
}

TEST(WithCollectiveChannels, UnchangedWhenMalformed) {
  const std::string module = ReadTestData("torch_gather_rank0.pb");
  for (const std::string& bad : {module.substr(0, module.size() / 2), module + "",
                                 std::string("", 4)}) {
    EXPECT_EQ(WithCollectiveChannels(bad), bad);
  }
}

// Every prefix of a real program: an answer each time, never a crash.
TEST(WithCollectiveChannels, TruncatedProgramsNeverCrash) {
  const std::string module = ReadTestData("torch_collectives.pb");
  for (size_t n = 0; n < module.size(); n += 7) {
    bool matchable;
    const std::string prefix = module.substr(0, n);
    WithCollectiveChannels(prefix);
    CollectiveSignature(prefix, "hlo", &matchable);
  }
}

// ---------------------------------------------------------------- CollectiveSignature

TEST(CollectiveSignature, EqualForTorchGatherOfTwoRanks) {
  // The ranks pad their slices differently, so the programs differ; their collectives match.
  const std::string rank0 = WithCollectiveChannels(ReadTestData("torch_gather_rank0.pb"));
  const std::string rank1 = WithCollectiveChannels(ReadTestData("torch_gather_rank1.pb"));
  ASSERT_NE(rank0, rank1);
  bool matchable0 = false, matchable1 = false;
  const std::string signature0 = CollectiveSignature(rank0, "hlo", &matchable0);
  const std::string signature1 = CollectiveSignature(rank1, "hlo", &matchable1);
  EXPECT_TRUE(matchable0);
  EXPECT_TRUE(matchable1);
  EXPECT_FALSE(signature0.empty());
  EXPECT_EQ(signature0, signature1);
}

TEST(CollectiveSignature, NotMatchableWithoutChannelIds) {
  // As torch-xla sends it: XLA could not match these across separately compiled programs.
  bool matchable = true;
  EXPECT_EQ(CollectiveSignature(ReadTestData("torch_gather_rank0.pb"), "hlo", &matchable), "");
  EXPECT_FALSE(matchable);
  // One collective without an id is enough.
  matchable = true;
  EXPECT_EQ(CollectiveSignature(ReadTestData("torch_collectives.pb"), "hlo", &matchable), "");
  EXPECT_FALSE(matchable);
  for (const char* opcode : {"all-to-all", "collective-permute"}) {
    matchable = true;
    EXPECT_EQ(CollectiveSignature(OneCollective(opcode, ArrayShape(kF32, {4})), "hlo", &matchable), "") << opcode;
    EXPECT_FALSE(matchable) << opcode;
  }
}

TEST(CollectiveSignature, ReadsTheOptimizedProgramWithConfig) {
  // The daemon reads the engine's optimized program: an HloModuleProtoWithConfig.
  const std::string program = ReadTestData("jax_psum_spmd.pb");
  bool matchable = false;
  const std::string signature = CollectiveSignature(program, "hlo_with_config", &matchable);
  EXPECT_TRUE(matchable);
  EXPECT_NE(signature.find("all-reduce"), std::string::npos);
  bool bare_matchable = false;
  EXPECT_EQ(CollectiveSignature(UnwrapConfig(program), "hlo", &bare_matchable), signature);
  EXPECT_TRUE(bare_matchable);
}

TEST(CollectiveSignature, DiffersWhenShapesDiffer) {
  bool a_ok, b_ok;
  const std::string a = CollectiveSignature(OneCollective("all-reduce", ArrayShape(kF32, {4}), ChannelId(1)), "hlo",
                                            &a_ok);
  const std::string b = CollectiveSignature(OneCollective("all-reduce", ArrayShape(kF32, {8}), ChannelId(1)), "hlo",
                                            &b_ok);
  ASSERT_TRUE(a_ok && b_ok);
  EXPECT_NE(a, b);
}

TEST(CollectiveSignature, DiffersWhenParticipantsDiffer) {
  const std::string f32 = ArrayShape(kF32, {4});
  bool a_ok, b_ok;
  const std::string a =
      CollectiveSignature(OneCollective("all-reduce", f32, ChannelId(1) + Groups({0, 1})), "hlo", &a_ok);
  const std::string b =
      CollectiveSignature(OneCollective("all-reduce", f32, ChannelId(1) + Groups({0, 2})), "hlo", &b_ok);
  ASSERT_TRUE(a_ok && b_ok);
  EXPECT_NE(a, b);
}

TEST(CollectiveSignature, DiffersWhenOrderDiffers) {
  const std::string f32 = ArrayShape(kF32, {4});
  auto program = [&](const std::string& first, const std::string& second) {
    return MakeModule({MakeComputation(
        1, {MakeInstruction(1, "parameter", f32), MakeInstruction(2, first, f32, {1}, ChannelId(1)),
            MakeInstruction(3, second, f32, {2}, ChannelId(2))}, 3)});
  };
  bool a_ok, b_ok;
  const std::string a = CollectiveSignature(program("all-reduce", "all-gather"), "hlo", &a_ok);
  const std::string b = CollectiveSignature(program("all-gather", "all-reduce"), "hlo", &b_ok);
  ASSERT_TRUE(a_ok && b_ok);
  EXPECT_NE(a, b);
}

TEST(CollectiveSignature, IgnoresInstructionsOtherThanCollectives) {
  const std::string f32 = ArrayShape(kF32, {4});
  const std::string a = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f32), MakeInstruction(2, "all-reduce", f32, {1}, ChannelId(1))}, 2)});
  const std::string b = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f32), MakeInstruction(2, "negate", f32, {1}),
          MakeInstruction(3, "exponential", f32, {2}), MakeInstruction(4, "all-reduce", f32, {3}, ChannelId(1))}, 4)});
  bool a_ok, b_ok;
  EXPECT_EQ(CollectiveSignature(a, "hlo", &a_ok), CollectiveSignature(b, "hlo", &b_ok));
  EXPECT_TRUE(a_ok && b_ok);
}

TEST(CollectiveSignature, NotMatchableWithoutCollectives) {
  bool matchable = true;
  EXPECT_EQ(CollectiveSignature(ReadTestData("jax_mlp.pb"), "hlo_with_config", &matchable), "");
  EXPECT_FALSE(matchable);
}

TEST(CollectiveSignature, NotMatchableForOtherFormatsOrMalformedModules) {
  const std::string program = WithCollectiveChannels(ReadTestData("torch_gather_rank0.pb"));
  bool matchable = true;
  EXPECT_EQ(CollectiveSignature(program, "mlir", &matchable), "");
  EXPECT_FALSE(matchable);
  matchable = true;
  EXPECT_EQ(CollectiveSignature(program.substr(0, program.size() - 3), "hlo", &matchable), "");
  EXPECT_FALSE(matchable);
  matchable = true;
  EXPECT_EQ(CollectiveSignature("", "hlo_with_config", &matchable), "");
  EXPECT_FALSE(matchable);
}

}  // namespace
}  // namespace pjrt_neuron::hlo
