// hlo::ModuleView and hlo::ModuleEditor (hlo/module_view.h) on hand-built modules and the
// canned programs: what each instruction reads as, where it sits in the bytes, and edits.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hlo/module_view.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

namespace proto = testing::proto;
using testing::ArrayShape;
using testing::MakeComputation;
using testing::MakeInstruction;
using testing::MakeModule;
using testing::TupleShape;

constexpr uint32_t kFrontendAttributes = 68;  // HloInstructionProto.frontend_attributes
constexpr uint32_t kReplicaIds = 1;           // ReplicaGroup.replica_ids

std::string Attributes(const std::string& key, const std::string& value) {
  std::string entry, attributes;
  AppendBytesField(&entry, 1, key);
  AppendBytesField(&entry, 2, value);
  AppendBytesField(&attributes, 1, entry);
  std::string field;
  AppendBytesField(&field, kFrontendAttributes, attributes);
  return field;
}

// add(p0, p0) in the entry, which calls computation 1 from a fusion; p0 is f32[2,3].
std::string TwoComputations() {
  const std::string f32 = ArrayShape(testing::kF32, {2, 3});
  const std::string s32 = ArrayShape(testing::kS32, {});
  std::string called;
  AppendVarintField(&called, proto::kInstructionCalledComputationIds, 1);
  std::string group;
  AppendVarintField(&group, kReplicaIds, 0);
  AppendVarintField(&group, kReplicaIds, 1);
  std::string groups;
  AppendBytesField(&groups, proto::kInstructionReplicaGroups, group);
  return MakeModule({
      MakeComputation(1, {MakeInstruction(10, "parameter", f32)}, 10),
      MakeComputation(2,
                      {MakeInstruction(20, "parameter", f32, {}, Attributes("key", "value")),
                       MakeInstruction(21, "add", f32, {20, 20}),
                       MakeInstruction(22, "fusion", f32, {21}, called),
                       MakeInstruction(23, "all-reduce", TupleShape({f32, s32}), {22}, groups)},
                      23),
  });
}

TEST(ModuleView, ReadsComputationsInstructionsAndTheirAttributes) {
  auto module = ModuleView::Read(TwoComputations());
  ASSERT_TRUE(module.ok()) << module.status().message();
  EXPECT_EQ(module->name(), "test_module");
  ASSERT_EQ(module->computations().size(), 2u);
  const ComputationView* entry = module->entry();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->id, 2);  // no entry id or name: the last
  ASSERT_EQ(entry->instructions.size(), 4u);
  const InstructionView& parameter = entry->instructions[0];
  EXPECT_EQ(parameter.opcode, "parameter");
  EXPECT_EQ(parameter.shape.element_type, testing::kF32);
  EXPECT_EQ(parameter.shape.dims, (std::vector<int64_t>{2, 3}));
  ASSERT_NE(parameter.Attribute("key"), nullptr);
  EXPECT_EQ(parameter.Attribute("key")->value, "value");
  EXPECT_EQ(parameter.users, (std::vector<size_t>{1}));  // add uses it twice: one user
  EXPECT_EQ(entry->instructions[1].operand_ids, (std::vector<int64_t>{20, 20}));
  EXPECT_EQ(entry->instructions[2].called_computation_ids, (std::vector<int64_t>{1}));
  const InstructionView& all_reduce = entry->instructions[3];
  EXPECT_TRUE(all_reduce.shape.is_tuple());
  EXPECT_EQ(all_reduce.shape.Leaves().size(), 2u);
  EXPECT_EQ(all_reduce.group_size, 2);
  EXPECT_FALSE(all_reduce.participants.empty());
  EXPECT_EQ(entry->Root(), &all_reduce);
  EXPECT_EQ(entry->Find(21), &entry->instructions[1]);
  EXPECT_EQ(module->Computation(1), &module->computations()[0]);
  EXPECT_EQ(module->LargestInstructionId(), 23);
}

TEST(ModuleView, SpansPointAtTheFieldsInTheBytes) {
  const std::string bytes = TwoComputations();
  auto module = ModuleView::Read(bytes);
  ASSERT_TRUE(module.ok());
  for (const ComputationView& computation : module->computations()) {
    for (const InstructionView& instruction : computation.instructions) {
      auto again = ModuleView::Read(MakeModule({MakeComputation(
          9, {std::string(module->Bytes(instruction.bytes))}, instruction.id)}));
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->computations()[0].instructions[0].opcode, instruction.opcode);
      std::string field;
      AppendBytesField(&field, proto::kComputationInstructions, std::string(module->Bytes(instruction.bytes)));
      EXPECT_EQ(module->Bytes(instruction.field), field);
    }
  }
}

TEST(ModuleEditor, WritesTheModuleAsReadWhenNothingChanged) {
  const std::string bytes = TwoComputations();
  auto module = ModuleView::Read(bytes);
  ASSERT_TRUE(module.ok());
  ModuleEditor editor(module.value());
  EXPECT_FALSE(editor.changed());
  EXPECT_EQ(editor.Write(), bytes);
}

TEST(ModuleEditor, ReplacesAndRemovesInstructionsAndFields) {
  auto module = ModuleView::Read(TwoComputations());
  ASSERT_TRUE(module.ok());
  const ComputationView& entry = module->computations()[1];
  ModuleEditor editor(module.value());
  const std::string f32 = ArrayShape(testing::kF32, {2, 3});
  editor.Replace(entry.instructions[1], {MakeInstruction(30, "negate", f32, {20}),
                                         MakeInstruction(21, "multiply", f32, {30, 20})});
  editor.Replace(entry.instructions[3], {});
  for (const FieldSpan& f : entry.fields) {
    if (f.number == proto::kComputationRootId) {
      std::string root;
      AppendVarintField(&root, proto::kComputationRootId, 22);
      editor.Replace(f, root);
    }
  }
  auto edited = ModuleView::Read(editor.Write());
  ASSERT_TRUE(edited.ok()) << edited.status().message();
  EXPECT_EQ(edited->computations()[0].instructions.size(), 1u);  // untouched
  const ComputationView& written = edited->computations()[1];
  std::vector<std::string> opcodes;
  for (const InstructionView& i : written.instructions) opcodes.push_back(i.opcode);
  EXPECT_EQ(opcodes, (std::vector<std::string>{"parameter", "negate", "multiply", "fusion"}));
  EXPECT_EQ(written.root_id, 22);
}

TEST(ModuleView, MalformedBytesAreInvalidArgumentAndTruncationsNeverCrash) {
  EXPECT_EQ(ModuleView::Read("\xff\xff\xff").status().code(), ErrorCode::kInvalidArgument);
  std::string bad_shape;
  AppendBytesField(&bad_shape, proto::kShapeDimensions, "\xff");  // a packed varint cut short
  auto module = ModuleView::Read(MakeModule({MakeComputation(1, {MakeInstruction(1, "constant", bad_shape)}, 1)}));
  EXPECT_EQ(module.status().code(), ErrorCode::kInvalidArgument);
  const std::string program = testing::ReadTestData("jax_mlp.pb");
  ASSERT_TRUE(ModuleView::ReadProgram(program, true).ok());
  for (size_t size = 0; size < program.size(); size += 7) (void)ModuleView::ReadProgram(program.substr(0, size), true);
}

TEST(ModuleView, ReadsPrograms) {
  EXPECT_EQ(ModuleView::ReadHloProgram("", "mlir").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ModuleView::ReadHloProgram("", "hlo").status().code(), ErrorCode::kInvalidArgument);
  // JAX's optimized programs come with their config; torch-xla's are plain modules.
  for (auto [name, format] : {std::pair{"jax_mlp.pb", "hlo_with_config"}, std::pair{"jax_sort.pb", "hlo_with_config"},
                              std::pair{"torch_collectives.pb", "hlo"}}) {
    auto module = ModuleView::ReadHloProgram(testing::ReadTestData(name), format);
    ASSERT_TRUE(module.ok()) << name << ": " << module.status().message();
    EXPECT_NE(module->entry(), nullptr) << name;
  }
}

}  // namespace
}  // namespace pjrt_neuron::hlo
