// engine/neuron/tensor_binding, neff_program and placement: tensors bound by name whatever
// order the runtime lists them in, every mismatch named; a compiled program's bytes read back
// as written; placements read from compile options.
#include <gtest/gtest.h>

#include "engine/neuron/neff_program.h"
#include "engine/neuron/nrt_api.h"
#include "engine/neuron/placement.h"
#include "engine/neuron/tensor_binding.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::engine::neuron {
namespace {

constexpr int kF32 = 11;

// f(p0: f32[2,3], p1: f32[4], p2: f32[0]) -> (f32[2,3], f32[4], f32[0]); result 1 aliases p1.
hlo::EntrySignature Signature() {
  hlo::EntrySignature s;
  s.module_name = "jit_step";
  s.parameters = {{kF32, {2, 3}}, {kF32, {4}}, {kF32, {0}}};
  s.outputs = {{kF32, {2, 3}}, {kF32, {4}}, {kF32, {0}}};
  s.aliases = {{1, 1, true}};
  return s;
}
const std::vector<size_t> kParameterBytes = {24, 16, 0};
const std::vector<size_t> kOutputBytes = {24, 16, 0};

std::vector<NeffTensor> Tensors() {
  // Outputs first and reversed: binding must not depend on order.
  return {{"output1", kNrtUsageOutput, 16}, {"output0", kNrtUsageOutput, 24},
          {"input1.must_alias_input", kNrtUsageInput, 16}, {"input0", kNrtUsageInput, 24}};
}

StatusOr<TensorBinding> Bind(const std::vector<NeffTensor>& tensors) {
  return BindTensors(Signature(), kParameterBytes, kOutputBytes, tensors, "jit_step");
}

TEST(TensorBinding, ByNameWithAliasAndZeroByteArraysLeftOut) {
  auto binding = Bind(Tensors());
  ASSERT_TRUE(binding.ok()) << binding.status().message();
  EXPECT_EQ(binding->input_names, (std::vector<std::string>{"input0", "input1.must_alias_input", ""}));
  EXPECT_EQ(binding->output_names, (std::vector<std::string>{"output0", "output1", ""}));
  EXPECT_EQ(binding->output_alias, (std::vector<int>{-1, 1, -1}));
}

TEST(TensorBinding, AnAliasTheNeffDoesNotMakeIsNoAlias) {
  auto tensors = Tensors();
  tensors[2].name = "input1";
  auto binding = Bind(tensors);
  ASSERT_TRUE(binding.ok()) << binding.status().message();
  EXPECT_EQ(binding->output_alias, (std::vector<int>{-1, -1, -1}));
}

void ExpectMismatch(const std::vector<NeffTensor>& tensors, const std::string& named) {
  auto binding = Bind(tensors);
  ASSERT_FALSE(binding.ok());
  EXPECT_EQ(binding.status().code(), ErrorCode::kInternal);
  EXPECT_NE(binding.status().message().find(named), std::string::npos) << binding.status().message();
  EXPECT_NE(binding.status().message().find("jit_step"), std::string::npos);
}

TEST(TensorBinding, EveryMismatchNamesTheTensor) {
  auto wrong_size = Tensors();
  wrong_size[1].size = 20;
  ExpectMismatch(wrong_size, "'output0' holds 20 bytes");
  auto missing_input = Tensors();
  missing_input.pop_back();
  ExpectMismatch(missing_input, "parameter 0 ('input0') has no input tensor");
  auto missing_output = Tensors();
  missing_output.erase(missing_output.begin());
  ExpectMismatch(missing_output, "result 1 ('output1') has no output tensor");
  auto stranger = Tensors();
  stranger.push_back({"input7", kNrtUsageInput, 4});
  ExpectMismatch(stranger, "'input7' is not one of its 3 parameters");
  auto foreign_name = Tensors();
  foreign_name.push_back({"weights", kNrtUsageInput, 4});
  ExpectMismatch(foreign_name, "'weights'");
  auto twice = Tensors();
  twice.push_back({"input0.must_alias_input", kNrtUsageInput, 24});
  ExpectMismatch(twice, "parameter 0 is both");
  auto bad_usage = Tensors();
  bad_usage[0].usage = 7;
  ExpectMismatch(bad_usage, "usage 7");
  auto unaliased = Tensors();
  unaliased[3].name = "input0.must_alias_input";
  ExpectMismatch(unaliased, "aliases none in the program");
}

TEST(TensorBinding, PositionalLookalikesAreNotAccepted) {
  auto padded = Tensors();
  padded[3].name = "input00";
  ExpectMismatch(padded, "'input00'");
}

TEST(NeffProgram, SerializedBytesReadBack) {
  NeffProgram p;
  p.name = "jit_step";
  p.num_replicas = 2;
  p.cores = {1, 0};
  p.signature = Signature();
  p.hlo_module = std::string("hlo\0bytes", 9);
  p.neff = std::string("NEFF\0\1\2", 7);
  p.made_by = "neuronx-cc 2.x --target=trn1 --lnc 1";
  auto back = DeserializeNeffProgram(SerializeNeffProgram(p));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->name, p.name);
  EXPECT_EQ(back->num_replicas, 2);
  EXPECT_EQ(back->cores, p.cores);
  EXPECT_EQ(back->hlo_module, p.hlo_module);
  EXPECT_EQ(back->neff, p.neff);
  EXPECT_EQ(back->made_by, p.made_by);
  EXPECT_EQ(back->signature.module_name, "jit_step");
  ASSERT_EQ(back->signature.parameters.size(), 3u);
  EXPECT_EQ(back->signature.parameters[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(back->signature.parameters[2].dims, (std::vector<int64_t>{0}));
  ASSERT_EQ(back->signature.aliases.size(), 1u);
  EXPECT_EQ(back->signature.aliases[0].output, 1);
  EXPECT_TRUE(back->signature.aliases[0].must_alias);
}

TEST(NeffProgram, ForeignAndCorruptBytesAreRefused) {
  EXPECT_EQ(DeserializeNeffProgram("XLA CPU executable").status().code(), ErrorCode::kInvalidArgument);
  NeffProgram p;
  p.cores = {0};
  p.neff = "n";
  std::string bytes = SerializeNeffProgram(p);
  EXPECT_EQ(DeserializeNeffProgram(bytes.substr(0, bytes.size() - 1)).status().code(), ErrorCode::kInvalidArgument);
  p.cores = {0, 1};  // two cores for one replica
  EXPECT_EQ(DeserializeNeffProgram(SerializeNeffProgram(p)).status().code(), ErrorCode::kInvalidArgument);
}

std::string Options(int replicas, const std::vector<int>& devices) {
  std::string build;
  hlo::AppendVarintField(&build, 4, static_cast<uint64_t>(replicas));
  hlo::AppendVarintField(&build, 5, 1);
  if (!devices.empty()) {
    hlo::AppendBytesField(&build, 9, DeviceAssignmentBytes(replicas, 1, devices));
  }
  std::string options;
  hlo::AppendBytesField(&options, 3, build);
  return options;
}

TEST(Placement, ReplicasAndAssignmentRoundTrip) {
  auto placement = ReadPlacement(Options(2, {1, 0}));
  ASSERT_TRUE(placement.ok()) << placement.status().message();
  EXPECT_EQ(placement->num_replicas, 2);
  EXPECT_EQ(placement->num_partitions, 1);
  EXPECT_EQ(placement->cores, (std::vector<int>{1, 0}));
  auto unplaced = ReadPlacement(Options(1, {}));
  ASSERT_TRUE(unplaced.ok());
  EXPECT_TRUE(unplaced->cores.empty());
  EXPECT_EQ(ReadPlacement("\xff").status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace pjrt_neuron::engine::neuron
