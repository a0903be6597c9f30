// hlo/neff_names: every parameter and result named for neuronx-cc, pass-through results copied,
// the entry signature read (types, dims, flattened results, aliases).
#include "hlo/neff_names.h"

#include <gtest/gtest.h>

#include <map>

#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

using namespace testing;  // NOLINT: the test helpers

// Field numbers of our own (xla/service/hlo.proto, xla/xla_data.proto).
constexpr uint32_t kModuleEntryId = 6;
constexpr uint32_t kModuleSchedule = 7;
constexpr uint32_t kModuleAliases = 8;
constexpr uint32_t kInstructionParameterNumber = 9;
constexpr uint32_t kInstructionFrontendAttributes = 68;

std::string Parameter(int64_t id, int number, const std::string& shape) {
  std::string extra;
  AppendVarintField(&extra, kInstructionParameterNumber, static_cast<uint64_t>(number));
  return MakeInstruction(id, "parameter", shape, {}, extra);
}

std::string Attributes(const std::map<std::string, std::string>& entries) {
  std::string attributes;
  for (const auto& [key, value] : entries) {
    std::string entry;
    AppendBytesField(&entry, 1, key);
    AppendBytesField(&entry, 2, value);
    AppendBytesField(&attributes, 1, entry);
  }
  std::string field;
  AppendBytesField(&field, kInstructionFrontendAttributes, attributes);
  return field;
}

// alias {output_index...} <- parameter, as HloInputOutputAliasProto.
std::string Aliases(const std::vector<std::pair<std::vector<int64_t>, int>>& entries) {
  std::string aliases;
  for (const auto& [index, parameter] : entries) {
    std::string entry, packed;
    for (int64_t i : index) AppendVarint(&packed, static_cast<uint64_t>(i));
    AppendBytesField(&entry, 1, packed);
    AppendVarintField(&entry, 2, static_cast<uint64_t>(parameter));
    AppendVarintField(&entry, 4, 2);  // MUST_ALIAS
    AppendBytesField(&aliases, 1, entry);
  }
  std::string field;
  AppendBytesField(&field, kModuleAliases, aliases);
  return field;
}

// instruction id -> its frontend attributes.
std::map<int64_t, std::map<std::string, std::string>> AttributesById(const std::string& module) {
  std::map<int64_t, std::map<std::string, std::string>> out;
  WireReader reader(module);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number != proto::kModuleComputations) continue;
    WireReader computation(f.payload);
    Field g;
    while (!computation.done() && computation.Next(&g)) {
      if (g.number != proto::kComputationInstructions) continue;
      int64_t id = 0;
      std::map<std::string, std::string> attributes;
      WireReader instruction(g.payload);
      Field h;
      while (!instruction.done() && instruction.Next(&h)) {
        if (h.number == proto::kInstructionId) id = static_cast<int64_t>(h.varint);
        if (h.number != kInstructionFrontendAttributes) continue;
        WireReader map(h.payload);
        Field e;
        while (!map.done() && map.Next(&e)) {
          std::string key, value;
          WireReader kv(e.payload);
          Field k;
          while (!kv.done() && kv.Next(&k)) (k.number == 1 ? key : value) = k.payload;
          attributes[key] = value;
        }
      }
      out[id] = attributes;
    }
  }
  return out;
}

const TestInstruction* Find(const TestComputation& c, int64_t id) {
  for (const TestInstruction& i : c.instructions) {
    if (i.id == id) return &i;
  }
  return nullptr;
}

const std::string kF32x2x3 = ArrayShape(kF32, {2, 3});
const std::string kS32x4 = ArrayShape(kS32, {4});

TEST(NeffNames, ParametersAreNamedByParameterNumberNotOrder) {
  const std::string module = MakeModule({MakeComputation(
      1, {Parameter(1, 1, kS32x4), Parameter(2, 0, kF32x2x3), MakeInstruction(3, "add", kF32x2x3, {2, 2})}, 3)});
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  auto attributes = AttributesById(named->module);
  EXPECT_EQ(attributes[1]["neff_input_names"], "input1");
  EXPECT_EQ(attributes[2]["neff_input_names"], "input0");
  EXPECT_EQ(attributes[3]["neff_output_names"], "output0");
  ASSERT_EQ(named->signature.parameters.size(), 2u);
  EXPECT_EQ(named->signature.parameters[0].element_type, kF32);
  EXPECT_EQ(named->signature.parameters[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(named->signature.parameters[1].element_type, kS32);
  ASSERT_EQ(named->signature.outputs.size(), 1u);
  EXPECT_EQ(named->signature.outputs[0].dims, (std::vector<int64_t>{2, 3}));
}

TEST(NeffNames, TupleRootNamesEveryFlattenedResult) {
  const std::string tuple = TupleShape({kF32x2x3, TupleShape({kS32x4, kS32x4})});
  const std::string module = MakeModule({MakeComputation(
      1, {Parameter(1, 0, kF32x2x3), MakeInstruction(2, "negate", kF32x2x3, {1}),
          MakeInstruction(3, "constant", TupleShape({kS32x4, kS32x4})), MakeInstruction(4, "tuple", tuple, {2, 3})},
      4)});
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(AttributesById(named->module)[4]["neff_output_names"], "output0,output1,output2");
  ASSERT_EQ(named->signature.outputs.size(), 3u);
  EXPECT_EQ(named->signature.outputs[2].element_type, kS32);
}

TEST(NeffNames, OtherFrontendAttributesStayAndOldNamesAreReplaced) {
  const std::string module = MakeModule({MakeComputation(
      1,
      {MakeInstruction(1, "parameter", kF32x2x3, {}, Attributes({{"neff_input_names", "stale"}, {"keep", "me"}})),
       MakeInstruction(2, "negate", kF32x2x3, {1}, Attributes({{"neff_output_names", "x,y"}}))},
      2)});
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  auto attributes = AttributesById(named->module);
  EXPECT_EQ(attributes[1]["neff_input_names"], "input0");
  EXPECT_EQ(attributes[1]["keep"], "me");
  EXPECT_EQ(attributes[2]["neff_output_names"], "output0");
}

TEST(NeffNames, PassThroughResultGetsACopyWithAFreshId) {
  const std::string tuple = TupleShape({kF32x2x3, kF32x2x3, kF32x2x3});
  const std::string module = MakeModule({MakeComputation(
      7, {Parameter(10, 0, kF32x2x3), MakeInstruction(11, "negate", kF32x2x3, {10}),
          MakeInstruction(12, "tuple", tuple, {10, 11, 10})},
      12)});
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  auto computations = ReadModule(named->module);
  ASSERT_EQ(computations.size(), 1u);
  const TestComputation& entry = computations[0];
  EXPECT_EQ(entry.root_id, 12);
  const TestInstruction* root = Find(entry, 12);
  ASSERT_NE(root, nullptr);
  ASSERT_EQ(root->operand_ids.size(), 3u);
  EXPECT_EQ(root->operand_ids[0], root->operand_ids[2]);  // one copy for the parameter
  EXPECT_EQ(root->operand_ids[1], 11);
  const TestInstruction* copy = Find(entry, root->operand_ids[0]);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->opcode, "copy");
  EXPECT_GT(copy->id, 12);
  EXPECT_EQ(copy->operand_ids, (std::vector<int64_t>{10}));
  EXPECT_EQ(copy->shape, kF32x2x3);
  // Operands come before their users, as XLA's reader needs.
  size_t copy_at = 0, root_at = 0;
  for (size_t i = 0; i < entry.instructions.size(); ++i) {
    if (entry.instructions[i].id == copy->id) copy_at = i;
    if (entry.instructions[i].id == 12) root_at = i;
  }
  EXPECT_LT(copy_at, root_at);
}

TEST(NeffNames, ParameterRootBecomesACopyThatCarriesTheOutputName) {
  const std::string module = MakeModule({MakeComputation(1, {Parameter(1, 0, kF32x2x3)}, 1)});
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  auto computations = ReadModule(named->module);
  const TestInstruction* root = Find(computations[0], computations[0].root_id);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->opcode, "copy");
  auto attributes = AttributesById(named->module);
  EXPECT_EQ(attributes[root->id]["neff_output_names"], "output0");
  EXPECT_EQ(attributes[1]["neff_input_names"], "input0");
  EXPECT_EQ(attributes[1].count("neff_output_names"), 0u);
}

TEST(NeffNames, AliasesAreFlatResultIndices) {
  const std::string tuple = TupleShape({kS32x4, TupleShape({kF32x2x3, kF32x2x3})});
  std::string module = MakeModule({MakeComputation(
      1, {Parameter(1, 0, kF32x2x3), Parameter(2, 1, kS32x4), MakeInstruction(3, "negate", kF32x2x3, {1}),
          MakeInstruction(4, "tuple", TupleShape({kF32x2x3, kF32x2x3}), {3, 3}), MakeInstruction(5, "tuple", tuple, {2, 4})},
      5)});
  module += Aliases({{{1, 1}, 0}, {{0}, 1}});
  auto signature = ReadEntrySignature(module);
  ASSERT_TRUE(signature.ok()) << signature.status().message();
  ASSERT_EQ(signature->aliases.size(), 2u);
  EXPECT_EQ(signature->aliases[0].output, 2);
  EXPECT_EQ(signature->aliases[0].parameter, 0);
  EXPECT_TRUE(signature->aliases[0].must_alias);
  EXPECT_EQ(signature->aliases[1].output, 0);
  EXPECT_EQ(signature->aliases[1].parameter, 1);
}

TEST(NeffNames, AnAliasIntoNoArrayIsMalformed) {
  std::string module = MakeModule({MakeComputation(1, {Parameter(1, 0, kF32x2x3), MakeInstruction(2, "negate", kF32x2x3, {1})}, 2)});
  module += Aliases({{{3}, 0}});
  EXPECT_EQ(ReadEntrySignature(module).status().code(), ErrorCode::kInvalidArgument);
}

TEST(NeffNames, EntryIsFoundByIdNotPosition) {
  std::string module = MakeModule({MakeComputation(5, {Parameter(1, 0, kS32x4)}, 1),
                                   MakeComputation(6, {Parameter(2, 0, kF32x2x3), Parameter(3, 1, kF32x2x3),
                                                       MakeInstruction(4, "add", kF32x2x3, {2, 3})},
                                                   4)});
  AppendVarintField(&module, kModuleEntryId, 5);
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  EXPECT_EQ(named->signature.parameters.size(), 1u);
  auto attributes = AttributesById(named->module);
  EXPECT_EQ(attributes[1]["neff_input_names"], "input0");
  EXPECT_EQ(attributes[2].count("neff_input_names"), 0u);  // not the entry: untouched
}

TEST(NeffNames, ScheduleGoesWhenCopiesAreAdded) {
  std::string module = MakeModule({MakeComputation(1, {Parameter(1, 0, kF32x2x3)}, 1)});
  AppendBytesField(&module, kModuleSchedule, "schedule");
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok());
  bool has_schedule = false;
  WireReader reader(named->module);
  Field f;
  while (!reader.done() && reader.Next(&f)) has_schedule |= f.number == kModuleSchedule;
  EXPECT_FALSE(has_schedule);
}

TEST(NeffNames, TupleParametersAreUnimplemented) {
  const std::string module = MakeModule({MakeComputation(
      1, {Parameter(1, 0, TupleShape({kF32x2x3})), MakeInstruction(2, "get-tuple-element", kF32x2x3, {1})}, 2)});
  EXPECT_EQ(WithNeffNames(module).status().code(), ErrorCode::kUnimplemented);
}

TEST(NeffNames, MalformedModulesAreInvalidArguments) {
  EXPECT_EQ(WithNeffNames("\xff\xff\xff").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(WithNeffNames("").status().code(), ErrorCode::kInvalidArgument);  // no computations
  const std::string gap = MakeModule({MakeComputation(1, {Parameter(1, 1, kF32x2x3)}, 1)});
  EXPECT_EQ(WithNeffNames(gap).status().code(), ErrorCode::kInvalidArgument);  // parameter 0 missing
}

TEST(NeffNames, RealJaxProgramGetsEveryName) {
  const std::string module = UnwrapConfig(ReadTestData("jax_mlp.pb"));
  ASSERT_FALSE(module.empty());
  auto named = WithNeffNames(module);
  ASSERT_TRUE(named.ok()) << named.status().message();
  size_t inputs = 0, outputs = 0;
  for (const auto& [id, attributes] : AttributesById(named->module)) {
    inputs += attributes.count("neff_input_names");
    outputs += attributes.count("neff_output_names");
  }
  EXPECT_EQ(inputs, named->signature.parameters.size());
  EXPECT_GT(inputs, 0u);
  EXPECT_EQ(outputs, 1u);
  EXPECT_FALSE(named->signature.outputs.empty());
}

}  // namespace
}  // namespace pjrt_neuron::hlo
