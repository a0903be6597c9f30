// AnalyzeProgramCost (hlo/cost_analysis.h): FLOPs, element operations, HBM bytes and collective
// bytes of programs whose counts are worked out by hand here, built with the tests' own field
// numbers, and of a real JAX program (data/jax_mlp.pb).
#include "hlo/cost_analysis.h"

#include <gtest/gtest.h>

#include <string>

#include "hlo/wire_format.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

using namespace testing;  // NOLINT: the test helpers

constexpr int kBF16 = 16;
constexpr uint32_t kModuleEntryComputationId = 6;
constexpr uint32_t kInstructionDotDimensionNumbers = 30;
constexpr uint32_t kInstructionConvolutionDimensionNumbers = 16;
constexpr uint32_t kInstructionBackendConfig = 43;
constexpr uint32_t kDotLhsContracting = 1;
constexpr uint32_t kDotRhsContracting = 2;
constexpr uint32_t kConvKernelOutputFeature = 4;
constexpr uint32_t kReplicaGroupIds = 1;

ProgramCost Analyze(const std::string& module, bool with_config = false) {
  auto cost = AnalyzeProgramCost(module, with_config);
  EXPECT_TRUE(cost.ok()) << cost.status().message();
  return cost.ok() ? cost.value() : ProgramCost();
}

std::string DotNumbers(int64_t lhs_contracting, int64_t rhs_contracting) {
  std::string numbers;
  AppendVarintField(&numbers, kDotLhsContracting, static_cast<uint64_t>(lhs_contracting));
  AppendVarintField(&numbers, kDotRhsContracting, static_cast<uint64_t>(rhs_contracting));
  std::string field;
  AppendBytesField(&field, kInstructionDotDimensionNumbers, numbers);
  return field;
}

// [m, k] x [k, n] in `type`, with the entry computation named by the module.
std::string MatmulModule(int type, int64_t m, int64_t k, int64_t n) {
  std::string entry = MakeComputation(
      7,
      {MakeInstruction(1, "parameter", ArrayShape(type, {m, k})),
       MakeInstruction(2, "parameter", ArrayShape(type, {k, n})),
       MakeInstruction(3, "dot", ArrayShape(type, {m, n}), {1, 2}, DotNumbers(1, 0))},
      3);
  std::string module = MakeModule({entry});
  AppendVarintField(&module, kModuleEntryComputationId, 7);
  return module;
}

TEST(AnalyzeProgramCost, CountsAFloat32Matmul) {
  const ProgramCost cost = Analyze(MatmulModule(kF32, 64, 128, 32));
  ASSERT_EQ(cost.matmul_flops.size(), 1u);
  EXPECT_EQ(cost.matmul_flops.at("fp32"), 2.0 * 64 * 128 * 32);
  EXPECT_EQ(cost.parameter_bytes, (64 * 128 + 128 * 32) * 4);
  EXPECT_EQ(cost.output_bytes, 64 * 32 * 4);
  EXPECT_EQ(cost.vector_ops, 0);
  EXPECT_TRUE(cost.collectives.empty());
}

TEST(AnalyzeProgramCost, CountsABfloat16MatmulAtItsOwnRateClass) {
  const ProgramCost cost = Analyze(MatmulModule(kBF16, 256, 512, 128));
  ASSERT_EQ(cost.matmul_flops.count("bf16"), 1u);
  EXPECT_EQ(cost.matmul_flops.count("fp32"), 0u);
  EXPECT_EQ(cost.matmul_flops.at("bf16"), 2.0 * 256 * 512 * 128);
  EXPECT_EQ(cost.parameter_bytes, (256 * 512 + 512 * 128) * 2);
  EXPECT_EQ(cost.output_bytes, 256 * 128 * 2);
}

TEST(AnalyzeProgramCost, CountsFloat16AndFp8MatmulsAtTheirRateClasses) {
  constexpr int kF16 = 10, kF8E4M3FN = 20, kF8E5M2 = 19;
  EXPECT_EQ(Analyze(MatmulModule(kF16, 4, 8, 2)).matmul_flops.at("fp16"), 2.0 * 4 * 8 * 2);
  EXPECT_EQ(Analyze(MatmulModule(kF8E4M3FN, 4, 8, 2)).matmul_flops.at("fp8"), 2.0 * 4 * 8 * 2);
  EXPECT_EQ(Analyze(MatmulModule(kF8E5M2, 4, 8, 2)).matmul_flops.at("fp8"), 2.0 * 4 * 8 * 2);
  EXPECT_EQ(Analyze(MatmulModule(kF8E4M3FN, 4, 8, 2)).parameter_bytes, 4 * 8 + 8 * 2);
}

TEST(AnalyzeProgramCost, DoublingEveryDimensionOfAMatmulMultipliesItsFlopsByEight) {
  const double small = Analyze(MatmulModule(kF32, 32, 32, 32)).matmul_flops.at("fp32");
  const double large = Analyze(MatmulModule(kF32, 64, 64, 64)).matmul_flops.at("fp32");
  EXPECT_EQ(large, 8 * small);
}

// XLA's CPU compiler multiplies bf16 in f32: a fusion converts each operand and another holds
// the dot, as jax.jit(lambda a, b: a @ b) on bf16 compiles. The dot counts at the bf16 rate.
TEST(AnalyzeProgramCost, CountsAMatmulTheCpuCompilerWidenedAtItsSourceType) {
  std::string calls_convert, calls_dot, parameter_1;
  AppendVarintField(&calls_convert, proto::kInstructionCalledComputationIds, 2);
  AppendVarintField(&calls_dot, proto::kInstructionCalledComputationIds, 3);
  AppendVarintField(&parameter_1, 9, 1);  // HloInstructionProto.parameter_number
  const std::string convert = MakeComputation(
      2,
      {MakeInstruction(20, "parameter", ArrayShape(kBF16, {8, 8})),
       MakeInstruction(21, "convert", ArrayShape(kF32, {8, 8}), {20})},
      21);
  const std::string dot = MakeComputation(
      3,
      {MakeInstruction(30, "parameter", ArrayShape(kF32, {8, 8})),
       MakeInstruction(31, "parameter", ArrayShape(kF32, {8, 8}), {}, parameter_1),
       MakeInstruction(32, "dot", ArrayShape(kF32, {8, 8}), {30, 31}, DotNumbers(1, 0))},
      32);
  const std::string entry = MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kBF16, {8, 8})),
       MakeInstruction(2, "fusion", ArrayShape(kF32, {8, 8}), {1}, calls_convert),
       MakeInstruction(3, "fusion", ArrayShape(kF32, {8, 8}), {2, 2}, calls_dot)},
      3);
  const ProgramCost cost = Analyze(MakeModule({convert, dot, entry}));
  ASSERT_EQ(cost.matmul_flops.size(), 1u);
  EXPECT_EQ(cost.matmul_flops.at("bf16"), 2.0 * 8 * 8 * 8);
  EXPECT_EQ(cost.parameter_bytes, 8 * 8 * 2);
}

// NCHW input [2, 3, 8, 8], OIHW kernel [16, 3, 3, 3], valid padding: output [2, 16, 6, 6].
// Each output element is 3 * 3 * 3 multiply-adds.
TEST(AnalyzeProgramCost, CountsAConvolution) {
  std::string numbers;
  AppendVarintField(&numbers, kConvKernelOutputFeature, 0);
  std::string extra;
  AppendBytesField(&extra, kInstructionConvolutionDimensionNumbers, numbers);
  const std::string module = MakeModule({MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kF32, {2, 3, 8, 8})),
       MakeInstruction(2, "parameter", ArrayShape(kF32, {16, 3, 3, 3})),
       MakeInstruction(3, "convolution", ArrayShape(kF32, {2, 16, 6, 6}), {1, 2}, extra)},
      3)});
  const ProgramCost cost = Analyze(module);
  EXPECT_EQ(cost.matmul_flops.at("fp32"), 2.0 * (2 * 16 * 6 * 6) * (3 * 3 * 3));
  EXPECT_EQ(cost.parameter_bytes, (2 * 3 * 8 * 8 + 16 * 3 * 3 * 3) * 4);
  EXPECT_EQ(cost.output_bytes, 2 * 16 * 6 * 6 * 4);
  // Lowered to a matmul: 16 output features by 27 inputs a window, over 72 output positions.
  ASSERT_EQ(cost.matmuls.size(), 1u);
  EXPECT_EQ(cost.matmuls[0].m, 16);
  EXPECT_EQ(cost.matmuls[0].k, 27);
  EXPECT_EQ(cost.matmuls[0].n, 72);
}

// HWIO kernel [3, 3, 3, 16]: the output features are dimension 3, the count is the same.
TEST(AnalyzeProgramCost, ReadsTheKernelsOutputFeatureDimension) {
  std::string numbers;
  AppendVarintField(&numbers, kConvKernelOutputFeature, 3);
  std::string extra;
  AppendBytesField(&extra, kInstructionConvolutionDimensionNumbers, numbers);
  const std::string module = MakeModule({MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kF32, {2, 8, 8, 3})),
       MakeInstruction(2, "parameter", ArrayShape(kF32, {3, 3, 3, 16})),
       MakeInstruction(3, "convolution", ArrayShape(kF32, {2, 6, 6, 16}), {1, 2}, extra)},
      3)});
  EXPECT_EQ(Analyze(module).matmul_flops.at("fp32"), 2.0 * (2 * 6 * 6 * 16) * (3 * 3 * 3));
}

// exp(x + y) * x over 1000 elements, and a sum of the product: 2000 vector operations on the
// element-wise ops, 1000 more for the reduction's inputs, 1000 transcendental.
TEST(AnalyzeProgramCost, CountsElementWiseTranscendentalAndReductionWork) {
  const std::string add = MakeComputation(
      2,
      {MakeInstruction(10, "parameter", ArrayShape(kF32, {})), MakeInstruction(11, "parameter", ArrayShape(kF32, {})),
       MakeInstruction(12, "add", ArrayShape(kF32, {}), {10, 11})},
      12);
  std::string to_apply;
  AppendVarintField(&to_apply, proto::kInstructionCalledComputationIds, 2);
  const std::string entry = MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kF32, {1000})),
       MakeInstruction(2, "parameter", ArrayShape(kF32, {1000})),
       MakeInstruction(3, "add", ArrayShape(kF32, {1000}), {1, 2}),
       MakeInstruction(4, "exponential", ArrayShape(kF32, {1000}), {3}),
       MakeInstruction(5, "multiply", ArrayShape(kF32, {1000}), {4, 1}),
       MakeInstruction(6, "constant", ArrayShape(kF32, {})),
       MakeInstruction(7, "reduce", ArrayShape(kF32, {}), {5, 6}, to_apply)},
      7);
  const ProgramCost cost = Analyze(MakeModule({add, entry}));
  EXPECT_TRUE(cost.matmul_flops.empty());
  EXPECT_EQ(cost.vector_ops, 3000);
  EXPECT_EQ(cost.transcendental_ops, 1000);
  EXPECT_EQ(cost.parameter_bytes, 8000);
  EXPECT_EQ(cost.output_bytes, 4);
}

// bf16 arithmetic as XLA's CPU compiler leaves it: widened to f32, operated on, narrowed back.
// The conversions between float types are no work (the engines convert on their read and
// write paths); a conversion to or from an integer type is.
TEST(AnalyzeProgramCost, ConversionsBetweenFloatTypesAreNoWork) {
  const std::string entry = MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kBF16, {1000})),
       MakeInstruction(2, "convert", ArrayShape(kF32, {1000}), {1}),
       MakeInstruction(3, "multiply", ArrayShape(kF32, {1000}), {2, 2}),
       MakeInstruction(4, "convert", ArrayShape(kBF16, {1000}), {3}),
       MakeInstruction(5, "convert", ArrayShape(kS32, {1000}), {4})},
      5);
  const ProgramCost cost = Analyze(MakeModule({entry}));
  EXPECT_EQ(cost.vector_ops, 2000);  // the multiply and the conversion to s32
}

std::string ReplicaGroups(std::initializer_list<int64_t> ids) {
  std::string group;
  for (int64_t id : ids) AppendVarintField(&group, kReplicaGroupIds, static_cast<uint64_t>(id));
  std::string field;
  AppendBytesField(&field, proto::kInstructionReplicaGroups, group);
  return field;
}

// An all-reduce of f32[1024] over replicas {0, 1}: each sends its 4096-byte operand.
TEST(AnalyzeProgramCost, CountsAnAllReduceOverTwoCores) {
  std::string to_apply;
  AppendVarintField(&to_apply, proto::kInstructionCalledComputationIds, 2);
  const std::string add = MakeComputation(
      2,
      {MakeInstruction(10, "parameter", ArrayShape(kF32, {})), MakeInstruction(11, "parameter", ArrayShape(kF32, {})),
       MakeInstruction(12, "add", ArrayShape(kF32, {}), {10, 11})},
      12);
  const std::string entry = MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kF32, {1024})),
       MakeInstruction(2, "all-reduce", ArrayShape(kF32, {1024}), {1}, to_apply + ReplicaGroups({0, 1}))},
      2);
  const ProgramCost cost = Analyze(MakeModule({add, entry}));
  ASSERT_EQ(cost.collectives.size(), 1u);
  EXPECT_EQ(cost.collectives[0].kind, "all-reduce");
  EXPECT_EQ(cost.collectives[0].bytes, 4096);
  EXPECT_EQ(cost.collectives[0].group_size, 2);
  EXPECT_EQ(cost.collectives[0].count, 1);
  EXPECT_EQ(cost.vector_ops, 0);  // the reduction computation is the collective's, not counted twice
}

// A while loop whose body is a [16,16] x [16,16] matmul, with a known trip count of 5.
TEST(AnalyzeProgramCost, MultipliesALoopBodyByItsKnownTripCount) {
  const std::string body = MakeComputation(
      2,
      {MakeInstruction(10, "parameter", ArrayShape(kF32, {16, 16})),
       MakeInstruction(11, "dot", ArrayShape(kF32, {16, 16}), {10, 10}, DotNumbers(1, 0))},
      11);
  const std::string condition =
      MakeComputation(3, {MakeInstruction(20, "parameter", ArrayShape(kF32, {16, 16})),
                          MakeInstruction(21, "constant", ArrayShape(kPred, {}))},
                      21);
  std::string extra;
  AppendVarintField(&extra, proto::kInstructionCalledComputationIds, 3);
  AppendVarintField(&extra, proto::kInstructionCalledComputationIds, 2);
  std::string known = extra;
  AppendBytesField(&known, kInstructionBackendConfig, "{\"known_trip_count\":{\"n\":\"5\"}}");
  auto module = [&](const std::string& loop_fields) {
    return MakeModule({body, condition,
                       MakeComputation(1,
                                       {MakeInstruction(1, "parameter", ArrayShape(kF32, {16, 16})),
                                        MakeInstruction(2, "while", ArrayShape(kF32, {16, 16}), {1}, loop_fields)},
                                       2)});
  };
  const ProgramCost counted = Analyze(module(known));
  EXPECT_EQ(counted.matmul_flops.at("fp32"), 5 * 2.0 * 16 * 16 * 16);
  EXPECT_FALSE(counted.unknown_trip_count);
  const ProgramCost unknown = Analyze(module(extra));
  EXPECT_EQ(unknown.matmul_flops.at("fp32"), 2.0 * 16 * 16 * 16);
  EXPECT_TRUE(unknown.unknown_trip_count);
}

// jnp.tanh(v @ w) @ w with v f32[4], w f32[4, 4], as the XLA CPU engine optimized it.
TEST(AnalyzeProgramCost, CountsJaxsOptimizedMlp) {
  const ProgramCost cost = Analyze(ReadTestData("jax_mlp.pb"), /*with_config=*/true);
  EXPECT_EQ(cost.matmul_flops.at("fp32"), 2 * (2.0 * 4 * 4));
  EXPECT_EQ(cost.transcendental_ops, 4);
  EXPECT_EQ(cost.output_bytes, 16);
}

TEST(AnalyzeProgramCost, RefusesBytesThatAreNoModule) {
  auto cost = AnalyzeProgramCost(std::string("\xff\xff\xff", 3), false);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(cost.status().message().find("HloModuleProto"), std::string::npos) << cost.status().message();
}

TEST(AnalyzeProgramCost, RecordsEachMatmulsShapeForTheTensorEngineTiles) {
  const ProgramCost cost = Analyze(MatmulModule(kBF16, 64, 128, 32));
  ASSERT_EQ(cost.matmuls.size(), 1u);
  const MatmulShape& m = cost.matmuls[0];
  EXPECT_EQ(m.type, "bf16");
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.m, 64);
  EXPECT_EQ(m.k, 128);
  EXPECT_EQ(m.n, 32);
  EXPECT_EQ(m.count, 1);
}

// An unfused result that is neither parameter nor root is an activation the compiler must place.
TEST(AnalyzeProgramCost, RecordsIntermediatesButNotParametersOrTheResult) {
  const std::string module = MakeModule({MakeComputation(
      1,
      {MakeInstruction(1, "parameter", ArrayShape(kF32, {64, 128})),
       MakeInstruction(2, "parameter", ArrayShape(kF32, {128, 32})),
       MakeInstruction(3, "dot", ArrayShape(kF32, {64, 32}), {1, 2}, DotNumbers(1, 0)),
       MakeInstruction(4, "negate", ArrayShape(kF32, {64, 32}), {3})},
      4)});
  const ProgramCost cost = Analyze(module);
  ASSERT_EQ(cost.intermediates.size(), 1u);
  EXPECT_EQ(cost.intermediates[0].bytes, 64 * 32 * 4);
  EXPECT_EQ(cost.intermediates[0].count, 1);
}

TEST(ProgramCostJson, WritesEveryCount) {
  const std::string text = ProgramCostJson(Analyze(MatmulModule(kF32, 2, 3, 4)));
  EXPECT_NE(text.find("\"matmul_flops\":{\"fp32\":48}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"parameter_bytes\":72"), std::string::npos) << text;
  EXPECT_NE(text.find("\"output_bytes\":32"), std::string::npos) << text;
  EXPECT_NE(text.find("\"matmuls\":[{\"type\":\"fp32\",\"batch\":1,\"m\":2,\"k\":3,\"n\":4,\"count\":1}]"),
            std::string::npos) << text;
  EXPECT_NE(text.find("\"intermediates\":[]"), std::string::npos) << text;
}

}  // namespace
}  // namespace pjrt_neuron::hlo
