// AnalyzeHloModule (hlo/compat_analysis.h) on real programs, one per check: JAX's as the
// plugin analyses them (the XLA CPU engine's optimized program, with config) and torch-xla's
// as it sends them (data/make_programs.py), and on modules built here for what the frameworks
// cannot produce on this machine. A finding must point at the `# case:` line of make_programs.py.
#include "hlo/compat_analysis.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "hlo/wire_format.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

using namespace testing;  // NOLINT: the test helpers

constexpr char kSource[] = "make_programs.py";

std::vector<CompatFinding> Analyze(const std::string& bytes, bool with_config, bool from_jax) {
  auto findings = AnalyzeHloModule(bytes, with_config, from_jax);
  EXPECT_TRUE(findings.ok()) << findings.status().message();
  return findings.ok() ? findings.value() : std::vector<CompatFinding>();
}

std::vector<CompatFinding> AnalyzeJax(const std::string& file, bool from_jax = true) {
  return Analyze(ReadTestData(file), /*with_config=*/true, from_jax);
}

// An instruction's metadata field: where in the user's code it comes from.
std::string At(const std::string& file, int line, const std::string& op_name = "op") {
  std::string field;
  AppendBytesField(&field, proto::kInstructionMetadata, Metadata(op_name, file, line));
  return field;
}

std::set<std::tuple<std::string, std::string, int>> Located(const std::vector<CompatFinding>& findings) {
  std::set<std::tuple<std::string, std::string, int>> out;
  for (const CompatFinding& f : findings) out.insert({f.check, f.source_file, f.source_line});
  return out;
}

// The program has exactly one finding, `check` at the line marked `case`.
void ExpectOnlyFinding(const std::vector<CompatFinding>& findings, const std::string& check,
                       const std::string& case_name, bool fails_on_trainium, const std::string& op_name_part) {
  ASSERT_EQ(findings.size(), 1u) << "findings: " << findings.size();
  const CompatFinding& f = findings[0];
  EXPECT_EQ(f.check, check);
  EXPECT_EQ(f.fails_on_trainium, fails_on_trainium);
  EXPECT_EQ(f.source_file, kSource);
  EXPECT_EQ(f.source_line, MarkedLine(case_name));
  EXPECT_NE(f.op_name.find(op_name_part), std::string::npos) << f.op_name;
  EXPECT_GE(f.count, 1);
  EXPECT_FALSE(f.what.empty());
  EXPECT_FALSE(f.why.empty());
  EXPECT_FALSE(f.fix.empty());
}

// ---------------------------------------------------------------- checks of every program

TEST(AnalyzeHloModule, FindsFloat64) {
  ExpectOnlyFinding(AnalyzeJax("jax_float64.pb"), "float64", "float64", true, "jit(float64)/");
}

TEST(AnalyzeHloModule, FindsComplex) {
  ExpectOnlyFinding(AnalyzeJax("jax_complex.pb"), "complex", "complex", true, "jit(complex_multiply)/");
}

TEST(AnalyzeHloModule, FindsFp8FormatsNeuronCoresLack) {
  ExpectOnlyFinding(AnalyzeJax("jax_fp8_e4m3fnuz.pb"), "fp8-format", "fp8-e4m3fnuz", true,
                    "jit(fp8_e4m3fnuz)/convert_element_type");
}

TEST(AnalyzeHloModule, AcceptsFp8FormatsNeuronCoresHave) {
  EXPECT_TRUE(AnalyzeJax("jax_fp8_e4m3fn.pb").empty());
}

TEST(AnalyzeHloModule, Int64IsANumericFinding) {
  ExpectOnlyFinding(AnalyzeJax("jax_int64.pb"), "int64-narrowed", "int64", false, "jit(int64)/");
}

TEST(AnalyzeHloModule, FindsTorchInt64AtEachLine) {
  const std::vector<CompatFinding> findings = Analyze(ReadTestData("torch_int64.pb"), false, false);
  EXPECT_EQ(Located(findings), (std::set<std::tuple<std::string, std::string, int>>{
                                   {"int64-narrowed", kSource, MarkedLine("torch-arange")},
                                   {"int64-narrowed", kSource, MarkedLine("torch-long-arithmetic")}}));
  for (const CompatFinding& f : findings) EXPECT_FALSE(f.fails_on_trainium);
}

TEST(AnalyzeHloModule, FindsTorchDynamicShape) {
  // torch.nonzero under XLA_EXPERIMENTAL=nonzero: a bounded dynamic dimension, s32[<=4,1].
  ExpectOnlyFinding(Analyze(ReadTestData("torch_nonzero.pb"), false, false), "dynamic-shape", "torch-nonzero", true,
                    "aten__nonzero");
}

TEST(AnalyzeHloModule, CleanProgramHasNoFinding) {
  EXPECT_TRUE(AnalyzeJax("jax_mlp.pb").empty());
  EXPECT_TRUE(AnalyzeJax("jax_psum_spmd.pb").empty());
}

// ---------------------------------------------------------------- JAX-only checks

TEST(AnalyzeHloModule, FindsCond) {
  ExpectOnlyFinding(AnalyzeJax("jax_cond.pb"), "cond", "cond", true, "jit(cond)/cond");
}

TEST(AnalyzeHloModule, FindsDataDependentWhile) {
  ExpectOnlyFinding(AnalyzeJax("jax_while.pb"), "data-dependent-while", "while", true, "jit(while_loop)/while");
}

TEST(AnalyzeHloModule, AcceptsFixedTripCountLoop) {
  // XLA keeps fori_loop(0, 5) a while loop, with its known trip count in the backend config.
  const std::string module = UnwrapConfig(ReadTestData("jax_fori.pb"));
  bool has_while = false;
  for (const TestComputation& c : ReadModule(module)) {
    for (const TestInstruction& i : c.instructions) has_while |= i.opcode == "while";
  }
  ASSERT_TRUE(has_while);
  EXPECT_TRUE(AnalyzeJax("jax_fori.pb").empty());
}

TEST(AnalyzeHloModule, FindsIntegerDot) {
  ExpectOnlyFinding(AnalyzeJax("jax_integer_dot.pb"), "integer-dot", "integer-dot", true,
                    "jit(integer_dot)/dot_general");
}

TEST(AnalyzeHloModule, FindsVariadicReduce) {
  ExpectOnlyFinding(AnalyzeJax("jax_argmax.pb"), "variadic-reduce", "argmax", true, "jit(argmax)/");
}

TEST(AnalyzeHloModule, FindsSortComparatorBreakingTies) {
  // Two keys: the comparator is or(lt(k0), and(eq(k0), lt(k1))), EQ on two different values.
  ExpectOnlyFinding(AnalyzeJax("jax_sort_two_keys.pb"), "sort-comparator", "sort-two-keys", true, "jit(two_key_sort)/");
}

TEST(AnalyzeHloModule, AcceptsPlainSort) {
  EXPECT_TRUE(AnalyzeJax("jax_sort.pb").empty());
}

TEST(AnalyzeHloModule, FindsHostCallback) {
  // JAX refuses callbacks on the neuron platform and the CPU engine lacks jaxlib's handler, so
  // the custom call is built here, with the target JAX gives pure_callback on CPU.
  std::string target;
  AppendBytesField(&target, proto::kInstructionCustomCallTarget, "xla_ffi_python_cpu_callback");
  target += At("model.py", 12, "jit(f)/pure_callback");
  const std::string f32 = ArrayShape(kF32, {4});
  const std::string module =
      MakeModule({MakeComputation(1, {MakeInstruction(1, "parameter", f32),
                                      MakeInstruction(2, "custom-call", f32, {1}, target)}, 2)});
  const std::vector<CompatFinding> findings = Analyze(module, false, true);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check, "host-callback");
  EXPECT_TRUE(findings[0].fails_on_trainium);
  EXPECT_EQ(findings[0].source_file, "model.py");
  EXPECT_EQ(findings[0].source_line, 12);
  EXPECT_EQ(findings[0].op_name, "jit(f)/pure_callback");
  EXPECT_TRUE(Analyze(module, false, false).empty());
}

TEST(AnalyzeHloModule, JaxOnlyChecksNeedFromJax) {
  for (const char* file : {"jax_cond.pb", "jax_while.pb", "jax_integer_dot.pb", "jax_argmax.pb",
                           "jax_sort_two_keys.pb"}) {
    EXPECT_TRUE(AnalyzeJax(file, /*from_jax=*/false).empty()) << file;
  }
  // The checks of every program do not.
  EXPECT_EQ(AnalyzeJax("jax_float64.pb", /*from_jax=*/false).size(), 1u);
  EXPECT_EQ(AnalyzeJax("jax_int64.pb", /*from_jax=*/false).size(), 1u);
}

// ---------------------------------------------------------------- formats and locations

TEST(AnalyzeHloModule, ReadsAModuleWithoutConfig) {
  const std::string module = UnwrapConfig(ReadTestData("jax_complex.pb"));
  EXPECT_EQ(Located(Analyze(module, /*with_config=*/false, true)), Located(AnalyzeJax("jax_complex.pb")));
}

// Newer XLA (lammps-jax-pjrt-cpu 0.11.2's) leaves OpMetadata's source_file / source_line empty
// and names a frame of the module's StackFrameIndexProto (stack_frame_id 15, index field 17).
TEST(AnalyzeHloModule, LocatesThroughTheStackFrameIndex) {
  auto frame_at = [](const std::string& op_name, uint64_t frame_id) {
    std::string metadata, field;
    AppendBytesField(&metadata, 2, op_name);    // op_name
    AppendVarintField(&metadata, 15, frame_id);  // stack_frame_id
    AppendBytesField(&field, proto::kInstructionMetadata, metadata);
    return field;
  };
  auto message = [](std::initializer_list<std::pair<uint32_t, uint64_t>> fields) {
    std::string out;
    for (const auto& [number, value] : fields) AppendVarintField(&out, number, value);
    return out;
  };
  std::string index;
  AppendBytesField(&index, 1, "train.py");                             // file_names[1]
  AppendBytesField(&index, 1, "model.py");                             // file_names[2]
  AppendBytesField(&index, 2, "<module>");                             // function_names[1]
  AppendBytesField(&index, 3, message({{1, 1}, {2, 1}, {3, 40}}));     // file_locations[1]: train.py:40
  AppendBytesField(&index, 3, message({{1, 2}, {2, 1}, {3, 7}, {4, 3}}));  // file_locations[2]: model.py:7
  AppendBytesField(&index, 4, message({{1, 1}}));                      // stack_frames[1]: train.py:40
  AppendBytesField(&index, 4, message({{1, 2}, {2, 1}}));              // stack_frames[2]: model.py:7, called from 1
  const std::string f64 = ArrayShape(kF64, {2});
  std::string module = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f64), MakeInstruction(2, "negate", f64, {1}, frame_at("neg", 2)),
          MakeInstruction(3, "exponential", f64, {2}, frame_at("exp", 1)),
          MakeInstruction(4, "negate", f64, {3}, frame_at("bad", 9))},  // no such frame: unlocated
      4)});
  AppendBytesField(&module, 17, index);  // after the computations, as XLA writes it
  const std::vector<CompatFinding> findings = Analyze(module, false, true);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].source_file, "model.py");  // the innermost frame: the user's line
  EXPECT_EQ(findings[0].source_line, 7);
  EXPECT_EQ(findings[0].op_name, "neg");
  EXPECT_EQ(findings[1].source_file, "train.py");
  EXPECT_EQ(findings[1].source_line, 40);
}

TEST(AnalyzeHloModule, TypesAreReportedWhereComputedNotWherePassed) {
  const std::string f64 = ArrayShape(kF64, {2});
  const std::string pair = TupleShape({f64, f64});
  std::string index;
  AppendVarintField(&index, 13, 0);  // HloInstructionProto.tuple_index
  const std::string module = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", pair), MakeInstruction(2, "get-tuple-element", f64, {1}, index),
          MakeInstruction(3, "tuple", pair, {2, 2})}, 3)});
  EXPECT_TRUE(Analyze(module, false, false).empty());
}

TEST(AnalyzeHloModule, FindsTypesInsideTuples) {
  const std::string pair = TupleShape({ArrayShape(kF32, {2}), ArrayShape(kC64, {2})});
  const std::string module = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", ArrayShape(kF32, {2})),
          MakeInstruction(2, "custom-call", pair, {1}, At("model.py", 3))}, 2)});
  const std::vector<CompatFinding> findings = Analyze(module, false, false);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check, "complex");
  EXPECT_EQ(findings[0].source_line, 3);
}

TEST(AnalyzeHloModule, CountsInstructionsAtOneLocation) {
  const std::string f64 = ArrayShape(kF64, {2});
  const std::string module = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f64), MakeInstruction(2, "negate", f64, {1}, At("a.py", 5)),
          MakeInstruction(3, "exponential", f64, {2}, At("a.py", 5)),
          MakeInstruction(4, "negate", f64, {3}, At("a.py", 9))},
      4)});
  const std::vector<CompatFinding> findings = Analyze(module, false, false);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].source_line, 5);
  EXPECT_EQ(findings[0].count, 2);
  EXPECT_EQ(findings[1].source_line, 9);
  EXPECT_EQ(findings[1].count, 1);
}

TEST(AnalyzeHloModule, UnlocatedFindingOnlyWhenNothingLocatesTheCheck) {
  // Compiler-made instructions (fusions, copies) carry no location.
  const std::string f64 = ArrayShape(kF64, {2});
  const std::string located = At("a.py", 5);
  const std::string both = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f64), MakeInstruction(2, "negate", f64, {1}, located),
          MakeInstruction(3, "copy", f64, {2})}, 3)});
  EXPECT_EQ(Located(Analyze(both, false, false)),
            (std::set<std::tuple<std::string, std::string, int>>{{"float64", "a.py", 5}}));
  const std::string unlocated = MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", f64), MakeInstruction(2, "copy", f64, {1})}, 2)});
  EXPECT_EQ(Located(Analyze(unlocated, false, false)),
            (std::set<std::tuple<std::string, std::string, int>>{{"float64", "", 0}}));
}

// An s64 constant instruction holding `values`, at a.py:`line`.
std::string Int64Constant(int64_t id, std::initializer_list<int64_t> values, int line) {
  std::string packed;
  for (int64_t v : values) AppendVarint(&packed, static_cast<uint64_t>(v));
  std::string literal;
  AppendBytesField(&literal, 5, packed);  // LiteralProto.s64s
  std::string extra = At("a.py", line);
  AppendBytesField(&extra, 8, literal);  // HloInstructionProto.literal
  return MakeInstruction(id, "constant", ArrayShape(kS64, {static_cast<int64_t>(values.size())}), {}, extra);
}

// parameter(1) * constant(2) -> multiply(3) at a.py:7, then compare(4) and a select(5) of it.
std::string Int64Product(std::initializer_list<int64_t> constant) {
  const std::string s64 = ArrayShape(kS64, {static_cast<int64_t>(constant.size())});
  const std::string pred = ArrayShape(kPred, {static_cast<int64_t>(constant.size())});
  return MakeModule({MakeComputation(
      1, {MakeInstruction(1, "parameter", s64), Int64Constant(2, constant, 6),
          MakeInstruction(3, "multiply", s64, {1, 2}, At("a.py", 7)),
          MakeInstruction(4, "compare", pred, {3, 1}, At("a.py", 8)),
          MakeInstruction(5, "select", s64, {4, 1, 1}, At("a.py", 9))},
      5)});
}

std::map<int, bool> BeyondInt32ByLine(const std::vector<CompatFinding>& findings) {
  std::map<int, bool> out;
  for (const CompatFinding& f : findings) {
    EXPECT_EQ(f.check, "int64-narrowed");
    out[f.source_line] = f.beyond_int32;
  }
  return out;
}

TEST(AnalyzeHloModule, Int64WithinInt32IsNotBeyondIt) {
  EXPECT_EQ(BeyondInt32ByLine(Analyze(Int64Product({3, -2147483648LL, 2147483647LL}), false, false)),
            (std::map<int, bool>{{6, false}, {7, false}, {9, false}}));
}

TEST(AnalyzeHloModule, Int64ConstantsBeyondInt32AndWhatTheyMakeAreBeyondIt) {
  // The select takes only the parameter and a predicate: its values stay what the caller sent.
  for (int64_t big : std::vector<int64_t>{int64_t{1} << 40, -2147483649LL, 2147483648LL}) {
    EXPECT_EQ(BeyondInt32ByLine(Analyze(Int64Product({1, big}), false, false)),
              (std::map<int, bool>{{6, true}, {7, true}, {9, false}}))
        << big;
  }
}

TEST(AnalyzeHloModule, Int64BeyondInt32ComesOutOfACalledComputation) {
  // A fusion whose body multiplies by 2^40 makes values beyond int32 at its call site.
  const std::string s64 = ArrayShape(kS64, {1});
  std::string calls;
  AppendVarintField(&calls, proto::kInstructionCalledComputationIds, 1);
  const std::string module = MakeModule({
      MakeComputation(1, {MakeInstruction(1, "parameter", s64), Int64Constant(2, {int64_t{1} << 40}, 3),
                          MakeInstruction(3, "multiply", s64, {1, 2})}, 3),
      MakeComputation(2, {MakeInstruction(10, "parameter", s64),
                          MakeInstruction(11, "fusion", s64, {10}, At("b.py", 4) + calls),
                          MakeInstruction(12, "add", s64, {11, 10}, At("b.py", 5))}, 12)});
  std::map<std::pair<std::string, int>, bool> beyond;
  for (const CompatFinding& f : Analyze(module, false, false)) beyond[{f.source_file, f.source_line}] = f.beyond_int32;
  EXPECT_TRUE((beyond[{"b.py", 4}]));
  EXPECT_TRUE((beyond[{"b.py", 5}]));
  EXPECT_TRUE((beyond[{"a.py", 3}]));
}

TEST(AnalyzeHloModule, DynamicDimensionPackedOrNot) {
  for (bool packed : {true, false}) {
    std::string shape = ArrayShape(kS32, {4, 1});
    if (packed) {
      AppendBytesField(&shape, proto::kShapeIsDynamicDimension, std::string("\x01\x00", 2));
    } else {
      AppendVarintField(&shape, proto::kShapeIsDynamicDimension, 1);
      AppendVarintField(&shape, proto::kShapeIsDynamicDimension, 0);
    }
    const std::string module = MakeModule({MakeComputation(1, {MakeInstruction(1, "parameter", shape)}, 1)});
    const std::vector<CompatFinding> findings = Analyze(module, false, false);
    ASSERT_EQ(findings.size(), 1u) << (packed ? "packed" : "unpacked");
    EXPECT_EQ(findings[0].check, "dynamic-shape");
  }
  std::string static_shape = ArrayShape(kS32, {4, 1});
  AppendBytesField(&static_shape, proto::kShapeIsDynamicDimension, std::string("\x00\x00", 2));
  EXPECT_TRUE(Analyze(MakeModule({MakeComputation(1, {MakeInstruction(1, "parameter", static_shape)}, 1)}), false,
                      false).empty());
}

// ---------------------------------------------------------------- malformed bytes

TEST(AnalyzeHloModule, MalformedBytesAreAnError) {
  const std::string module = UnwrapConfig(ReadTestData("jax_float64.pb"));
  const std::vector<std::string> malformed = {
      std::string("\x1a\x10", 2),                // a computation past the end
      std::string("\x1a\x03\x12\x05\x0a", 5),    // an instruction past its computation's end
      std::string("\x1a\x04\x12\x02\x0a\x7f", 6),  // an instruction field past the instruction's end
      module.substr(0, module.size() - 1),
  };
  for (const std::string& bytes : malformed) {
    auto findings = AnalyzeHloModule(bytes, false, true);
    ASSERT_FALSE(findings.ok()) << HexForTest(bytes.substr(0, 16));
    EXPECT_EQ(findings.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(AnalyzeHloModule, EmptyModuleHasNoFinding) {
  EXPECT_TRUE(Analyze("", false, true).empty());
  EXPECT_TRUE(Analyze("", true, true).empty());
}

// Every prefix and many one-byte changes of a real program: an answer each time, never a crash.
TEST(AnalyzeHloModule, DamagedProgramsNeverCrash) {
  const std::string program = ReadTestData("jax_sort_two_keys.pb");
  for (size_t n = 0; n < program.size(); ++n) AnalyzeHloModule(program.substr(0, n), true, true);
  for (size_t at = 0; at < program.size(); at += 3) {
    for (int value : {0x00, 0x80, 0xff}) {
      std::string damaged = program;
      damaged[at] = static_cast<char>(value);
      AnalyzeHloModule(damaged, true, true);
    }
  }
}

}  // namespace
}  // namespace pjrt_neuron::hlo
