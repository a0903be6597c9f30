// hlo::StripOutputPlacements on hand-built modules: annotations removed and their users rewired,
// each output's memory kind found through sharding marks, the host memory space dropped.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "hlo/output_placement.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

namespace proto = testing::proto;
constexpr uint32_t kFrontendAttributes = 68;  // HloInstructionProto.frontend_attributes
constexpr uint32_t kModuleEntryName = 2;       // HloModuleProto.entry_computation_name
constexpr uint32_t kModuleHostProgramShape = 4;
constexpr uint32_t kProgramShapeResult = 2;    // ProgramShapeProto
constexpr uint32_t kShapeLayout = 5;           // ShapeProto
constexpr uint32_t kLayoutMemorySpace = 8;     // LayoutProto

std::string Instruction(const std::string& name, const std::string& opcode, int64_t id,
                        const std::vector<int64_t>& operands, const std::string& target = "",
                        const std::string& placement = "") {
  std::string out;
  AppendBytesField(&out, proto::kInstructionName, name);
  AppendBytesField(&out, proto::kInstructionOpcode, opcode);
  AppendVarintField(&out, proto::kInstructionId, static_cast<uint64_t>(id));
  std::string packed;
  for (int64_t operand : operands) AppendVarint(&packed, static_cast<uint64_t>(operand));
  if (!operands.empty()) AppendBytesField(&out, proto::kInstructionOperandIds, packed);
  if (!target.empty()) AppendBytesField(&out, proto::kInstructionCustomCallTarget, target);
  if (!placement.empty()) {
    std::string pair, entry;
    AppendBytesField(&pair, 1, "_xla_buffer_placement");
    AppendBytesField(&pair, 2, placement);
    AppendBytesField(&entry, 1, pair);
    AppendBytesField(&out, kFrontendAttributes, entry);
  }
  return out;
}

std::string HostLayoutResult() {
  std::string layout, element, result, program_shape;
  AppendVarintField(&layout, kLayoutMemorySpace, 5);
  AppendVarintField(&element, proto::kShapeElementType, 11);
  AppendBytesField(&element, kShapeLayout, layout);
  AppendVarintField(&result, proto::kShapeElementType, 13);
  AppendBytesField(&result, proto::kShapeTupleShapes, element);
  AppendBytesField(&program_shape, kProgramShapeResult, result);
  return program_shape;
}

// main(p) = (annotate(pinned_host, mul) through a sharding mark, annotate(device, add))
std::string Module() {
  std::string computation;
  AppendBytesField(&computation, proto::kComputationName, "main");
  for (const std::string& i : {Instruction("p", "parameter", 1, {}), Instruction("mul", "multiply", 2, {1, 1}),
                               Instruction("to_host", "custom-call", 3, {2}, kAnnotateDevicePlacement, "pinned_host"),
                               Instruction("mark", "custom-call", 4, {3}, "xla.sdy.FuncResultSharding"),
                               Instruction("add", "add", 5, {1, 1}),
                               Instruction("stay", "custom-call", 6, {5}, kAnnotateDevicePlacement, "device"),
                               Instruction("out", "tuple", 7, {4, 6})}) {
    AppendBytesField(&computation, proto::kComputationInstructions, i);
  }
  AppendVarintField(&computation, proto::kComputationRootId, 7);
  std::string module;
  AppendBytesField(&module, proto::kModuleName, "offload");
  AppendBytesField(&module, kModuleEntryName, "main");
  AppendBytesField(&module, proto::kModuleComputations, computation);
  AppendBytesField(&module, kModuleHostProgramShape, HostLayoutResult());
  return module;
}

// name -> operand ids of the module's instructions.
std::map<std::string, std::vector<int64_t>> Operands(const std::string& module) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const testing::TestComputation& computation : testing::ReadModule(module)) {
    for (const testing::TestInstruction& instruction : computation.instructions) {
      out[instruction.name] = instruction.operand_ids;
    }
  }
  return out;
}

TEST(OutputPlacementTest, AnnotationsGoAndEachOutputKeepsItsMemoryKind) {
  auto placed = StripOutputPlacements(Module());
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->output_memory_kinds, (std::vector<std::string>{"pinned_host", "device"}));
  auto operands = Operands(placed->module);
  EXPECT_EQ(operands.count("to_host"), 0u);
  EXPECT_EQ(operands.count("stay"), 0u);
  EXPECT_EQ(operands["mark"], (std::vector<int64_t>{2}));  // now reads the product itself
  EXPECT_EQ(operands["out"], (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(operands["mul"], (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(placed->module.find(std::string(1, static_cast<char>((kLayoutMemorySpace << 3) | 0)) + "\x05"),
            std::string::npos);  // no memory space 5 left in the program shape
}

TEST(OutputPlacementTest, AModuleWithoutAnnotationsComesBackWithNoKinds) {
  std::string computation;
  AppendBytesField(&computation, proto::kComputationName, "main");
  AppendBytesField(&computation, proto::kComputationInstructions, Instruction("p", "parameter", 1, {}));
  AppendVarintField(&computation, proto::kComputationRootId, 1);
  std::string module;
  AppendBytesField(&module, kModuleEntryName, "main");
  AppendBytesField(&module, proto::kModuleComputations, computation);
  auto placed = StripOutputPlacements(module);
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->output_memory_kinds, (std::vector<std::string>{""}));
  EXPECT_EQ(placed->module, module);
}

TEST(OutputPlacementTest, UnreadableBytesAreInvalidArgument) {
  auto placed = StripOutputPlacements(std::string("\x1a\xff\xff\xff\xff\x0f", 6));
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pjrt_neuron::hlo
