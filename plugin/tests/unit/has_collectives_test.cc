// hlo::HasCollectives reads opcodes, not text: hand-built HloModuleProtos with and without
// collectives, wrapped with a config or not, and programs it cannot read.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "hlo/collective_program.h"
#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

std::string NamedInstruction(const std::string& name, const std::string& opcode) {
  std::string instruction;
  AppendBytesField(&instruction, fields::kInstructionName, name);
  AppendBytesField(&instruction, fields::kInstructionOpcode, opcode);
  return instruction;
}

// A module of one computation per list of (name, opcode) instructions.
std::string ModuleOf(const std::vector<std::vector<std::pair<std::string, std::string>>>& computations) {
  std::string module;
  AppendBytesField(&module, fields::kModuleName, "m");
  for (const auto& instructions : computations) {
    std::string computation;
    for (const auto& [name, opcode] : instructions) {
      AppendBytesField(&computation, fields::kComputationInstructions, NamedInstruction(name, opcode));
    }
    AppendBytesField(&module, fields::kModuleComputations, computation);
  }
  return module;
}

std::string WithConfig(const std::string& module) {
  std::string wrapped;
  AppendBytesField(&wrapped, fields::kWithConfigModule, module);
  return wrapped;
}

TEST(HasCollectives, AProgramWithoutCollectivesHasNone) {
  std::string module = ModuleOf({{{"p", "parameter"}, {"add.1", "add"}}});
  EXPECT_FALSE(HasCollectives(module, "hlo"));
  EXPECT_FALSE(HasCollectives(WithConfig(module), "hlo_with_config"));
}

TEST(HasCollectives, NamesThatMentionACollectiveDoNotCount) {
  // A search of the bytes would take these for collectives; their opcodes are not.
  std::string module = ModuleOf({{{"all-reduce.sum", "add"}, {"collective-permute-like", "copy"}}});
  EXPECT_FALSE(HasCollectives(module, "hlo"));
}

TEST(HasCollectives, EveryCollectiveOpcodeCountsInAnyComputation) {
  for (const char* opcode : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                             "collective-permute", "collective-broadcast", "all-reduce-start", "all-gather-start",
                             "collective-permute-start"}) {
    std::string module = ModuleOf({{{"p", "parameter"}}, {{"p", "parameter"}, {"x", opcode}}});
    EXPECT_TRUE(HasCollectives(module, "hlo")) << opcode;
    EXPECT_TRUE(HasCollectives(WithConfig(module), "hlo_with_config")) << opcode;
  }
}

TEST(HasCollectives, WhatCannotBeReadMayHaveCollectives) {
  std::string module = ModuleOf({{{"add.1", "add"}}});
  EXPECT_TRUE(HasCollectives(module.substr(0, module.size() - 2), "hlo"));  // truncated
  EXPECT_TRUE(HasCollectives(module, "mlir"));                              // not read here
  EXPECT_TRUE(HasCollectives(std::string(), "hlo_with_config"));            // no module inside
}

TEST(RunsAlikeOnEveryCore, NoCollectiveNorCoreIdRunsAlike) {
  const std::string module = ModuleOf({{{"p", "parameter"}, {"add.1", "add"}}});
  EXPECT_TRUE(RunsAlikeOnEveryCore(module, "hlo"));
  EXPECT_TRUE(RunsAlikeOnEveryCore(WithConfig(module), "hlo_with_config"));
}

TEST(RunsAlikeOnEveryCore, ReplicaOrPartitionIdOrACollectiveDoesNot) {
  for (const char* opcode : {"replica-id", "partition-id", "all-reduce", "collective-permute-start"}) {
    const std::string module = ModuleOf({{{"p", "parameter"}}, {{"fused", "add"}, {"id", opcode}}});
    EXPECT_FALSE(RunsAlikeOnEveryCore(module, "hlo")) << opcode;
  }
  EXPECT_FALSE(HasCollectives(ModuleOf({{{"id", "replica-id"}}}), "hlo"));  // not a collective itself
}

TEST(RunsAlikeOnEveryCore, WhatCannotBeReadDoesNot) {
  EXPECT_FALSE(RunsAlikeOnEveryCore("module @m {}", "mlir"));
  EXPECT_FALSE(RunsAlikeOnEveryCore(std::string("\x1a\x05\x12", 3), "hlo"));
}

}  // namespace
}  // namespace pjrt_neuron::hlo
