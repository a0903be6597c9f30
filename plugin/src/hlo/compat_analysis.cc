// The Trainium compatibility analysis over a program's HLO instructions (compat_analysis.h).
#include "hlo/compat_analysis.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {
namespace {

// xla.PrimitiveType values.
enum PrimitiveType : int {
  kS64 = 5, kF64 = 12, kTuple = 13, kC64 = 15, kC128 = 18,
  kF8E5M2 = 19, kF8E4M3FN = 20, kF8E4M3B11FNUZ = 23, kF8E5M2FNUZ = 24, kF8E4M3FNUZ = 25, kF8E4M3 = 28,
  kF8E3M4 = 29, kS1 = 30, kU1 = 31, kF4E2M1FN = 32, kF8E8M0FNU = 33,
};

// The narrow float formats (fp8, fp4); NeuronCores compute only fp8 e4m3 and e5m2.
bool IsNarrowFloat(int t) {
  return t == kF8E5M2 || t == kF8E4M3FN || t == kF8E4M3 || t == kF8E4M3B11FNUZ || t == kF8E5M2FNUZ ||
         t == kF8E4M3FNUZ || t == kF8E3M4 || t == kF4E2M1FN || t == kF8E8M0FNU;
}
bool IsNeuronFp8(int t) { return t == kF8E5M2 || t == kF8E4M3FN || t == kF8E4M3; }
bool IsInteger(int t) { return (t >= 2 && t <= 9) || t == 21 || t == 22 || t == 26 || t == 27 || t == kS1 || t == kU1; }

// The element types of a shape's arrays.
std::vector<int> LeafTypes(const ShapeView& shape) {
  std::vector<int> types;
  for (const ShapeView* leaf : shape.Leaves()) {
    if (leaf->element_type != 0) types.push_back(leaf->element_type);
  }
  return types;
}

struct Check {
  const char* id;
  const char* what;
  const char* why;
  const char* fix;
  bool fails_on_trainium;
};

const Check kFloat64{"float64", "float64 values",
                     "neuronx-cc does not support float64", "use float32 (or bfloat16); keep jax_enable_x64 off", true};
const Check kComplex{"complex", "complex numbers", "neuronx-cc supports complex types only in a few operations",
                     "carry real and imaginary parts as two float32 arrays", true};
const Check kFp8{"fp8-format", "an fp8 (or fp4) format other than e4m3 / e5m2",
                 "NeuronCores implement only the fp8 e4m3 and e5m2 formats", "use float8_e4m3fn or float8_e5m2", true};
const Check kDynamic{"dynamic-shape", "a dynamic shape", "neuronx-cc compiles static shapes only",
                     "pad to a fixed size (bucket the shapes) so every dimension is known when compiling", true};
const Check kInt64{"int64-narrowed", "int64 values", "neuronx-cc narrows int64 to int32 by default, so values beyond "
                   "2^31 wrap", "use int32, or keep values within the int32 range", false};
const Check kCond{"cond", "lax.cond (an HLO conditional)", "the Neuron compiler does not support conditionals in JAX "
                  "programs", "compute both branches and pick with jnp.where / lax.select", true};
const Check kWhile{"data-dependent-while", "a while_loop whose trip count depends on data",
                   "neuronx-cc needs loop trip counts known when compiling",
                   "use lax.fori_loop / lax.scan with a fixed number of steps", true};
const Check kCallback{"host-callback", "a host callback", "NeuronCores cannot call back into Python during a program",
                      "move the callback out of the jitted function", true};
const Check kFfiCall{"ffi-call", "a call to an FFI handler (jax.ffi, or a library's custom call)",
                     "a NeuronCore runs no host code inside a program, and neuronx-cc has none of XLA's FFI handlers",
                     "write it with jax.numpy / lax operations, or call it outside the jitted function", true};
const Check kIntegerDot{"integer-dot", "a matrix product of integers", "NeuronCores' matrix units multiply floating "
                        "point only", "cast the operands to float32 or bfloat16 before the dot", true};
const Check kVariadicReduce{"variadic-reduce", "a reduction over several arrays at once (e.g. argmax/argmin)",
                            "the Neuron compiler does not support variadic reductions in JAX programs",
                            "reduce each array separately, e.g. find the max, then its index with jnp.where", true};
const Check kSortComparator{"sort-comparator", "a sort comparator other than LT/LE/GT/GE",
                            "neuronx-cc supports sort comparators LT, LE, GT and GE only",
                            "sort with a plain ascending/descending comparison", true};

class Collector {
 public:
  void Add(const Check& check, const InstructionView& at, bool beyond_int32 = false) {
    auto key = std::make_tuple(std::string(check.id), at.source_file, at.source_line);
    auto it = index_.find(key);
    if (it != index_.end()) {
      findings_[it->second].count += 1;
      findings_[it->second].beyond_int32 |= beyond_int32;
      return;
    }
    index_[key] = findings_.size();
    findings_.push_back({check.id, check.what, check.why, check.fix, check.fails_on_trainium, beyond_int32,
                         at.op_name, at.source_file, at.source_line, 1});
  }
  // Instructions the compiler made (fusions, copies) carry no location; they only repeat
  // what a located instruction already shows.
  std::vector<CompatFinding> Take() {
    std::set<std::string> located, located_beyond_int32;
    for (const CompatFinding& f : findings_) {
      if (f.source_file.empty()) continue;
      located.insert(f.check);
      if (f.beyond_int32) located_beyond_int32.insert(f.check);
    }
    std::vector<CompatFinding> out;
    for (CompatFinding& f : findings_) {
      // Kept when it is the only sign that values leave the int32 range.
      const bool adds_beyond_int32 = f.beyond_int32 && !located_beyond_int32.count(f.check);
      if (f.source_file.empty() && located.count(f.check) && !adds_beyond_int32) continue;
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::map<std::tuple<std::string, std::string, int>, size_t> index_;
  std::vector<CompatFinding> findings_;
};

// A comparator orders by LT/LE/GT/GE. Equality between two different values means it breaks
// ties on further keys; equality with a constant or with itself is NaN / -0.0 handling.
bool ComparatorIsPlain(const ComputationView& comparator, const std::map<int64_t, const ComputationView*>& by_id,
                       int depth) {
  if (depth > 8) return true;
  auto is_constant = [&](int64_t id) {
    const InstructionView* operand = comparator.Find(id);
    return operand != nullptr && operand->opcode == "constant";
  };
  for (const InstructionView& i : comparator.instructions) {
    for (int64_t called : i.called_computation_ids) {  // the compiler moves comparator bodies into fusions
      auto it = by_id.find(called);
      if (it != by_id.end() && !ComparatorIsPlain(*it->second, by_id, depth + 1)) return false;
    }
    if (i.opcode != "compare") continue;
    const std::string& d = i.comparison_direction;
    if (d == "LT" || d == "LE" || d == "GT" || d == "GE") continue;
    if (i.operand_ids.size() == 2 && i.operand_ids[0] != i.operand_ids[1] && !is_constant(i.operand_ids[0]) &&
        !is_constant(i.operand_ids[1])) {
      return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<std::vector<CompatFinding>> AnalyzeHloModule(const std::string& bytes, bool with_config, bool from_jax) {
  StatusOr<ModuleView> module = ModuleView::ReadProgram(bytes, with_config);
  if (!module.ok()) return InvalidArgument("the program is not a valid HloModuleProto");
  return AnalyzeHloModule(module.value(), from_jax);
}

std::vector<CompatFinding> AnalyzeHloModule(const ModuleView& module, bool from_jax) {
  std::map<int64_t, const ComputationView*> by_id;
  for (const ComputationView& c : module.computations()) by_id[c.id] = &c;

  // Which s64 values can leave the int32 range: those computed from an int64 constant outside
  // it. Computations and their instructions come in post order, so operands and callees are
  // seen first. Values from parameters are not known when compiling and are not counted.
  std::set<int64_t> computations_beyond_int32;
  Collector found;
  for (const ComputationView& computation : module.computations()) {
    std::set<int64_t> beyond_int32;
    for (const InstructionView& i : computation.instructions) {
      const std::vector<int> types = LeafTypes(i.shape);
      bool int64_out = false;
      for (int t : types) int64_out |= t == kS64;
      bool beyond = i.literal_beyond_int32;
      for (int64_t id : i.operand_ids) beyond |= beyond_int32.count(id) > 0;
      for (int64_t id : i.called_computation_ids) beyond |= computations_beyond_int32.count(id) > 0;
      beyond &= int64_out;
      if (beyond) {
        beyond_int32.insert(i.id);
        computations_beyond_int32.insert(computation.id);
      }
      bool f64 = false, complex = false, fp8 = false, int64 = false;
      for (int t : types) {
        f64 |= t == kF64;
        complex |= t == kC64 || t == kC128;
        fp8 |= IsNarrowFloat(t) && !IsNeuronFp8(t);
        int64 |= t == kS64;  // unsigned 64-bit values are JAX's internal PRNG counters, not user data
      }
      if (i.opcode == "parameter" || i.opcode == "tuple" || i.opcode == "get-tuple-element") {
        // Types are reported where values are computed, not where they pass through.
      } else {
        if (f64) found.Add(kFloat64, i);
        if (complex) found.Add(kComplex, i);
        if (fp8) found.Add(kFp8, i);
        if (int64) found.Add(kInt64, i, beyond);
      }
      if (i.shape.dynamic) found.Add(kDynamic, i);
      // Typed FFI calls only: XLA's own custom calls (Sharding, MoveToHost, ...) are older versions.
      constexpr uint64_t kTypedFfi = 4;
      if (i.opcode == "custom-call" && i.custom_call_api_version == kTypedFfi &&
          i.custom_call_target.find("callback") == std::string::npos) {
        found.Add(kFfiCall, i);
      }
      if (!from_jax) continue;
      if (i.opcode == "conditional") found.Add(kCond, i);
      if (i.opcode == "while" && i.backend_config.find("known_trip_count") == std::string::npos) found.Add(kWhile, i);
      if (i.opcode == "custom-call" && i.custom_call_target.find("callback") != std::string::npos) {
        found.Add(kCallback, i);
      }
      if (i.opcode == "dot") {
        bool integer = !types.empty();
        for (int t : types) integer &= IsInteger(t);
        if (integer) found.Add(kIntegerDot, i);
      }
      if (i.opcode == "reduce" && i.shape.is_tuple()) found.Add(kVariadicReduce, i);
      if (i.opcode == "sort") {
        for (int64_t id : i.called_computation_ids) {
          auto it = by_id.find(id);
          if (it != by_id.end() && !ComparatorIsPlain(*it->second, by_id, 0)) found.Add(kSortComparator, i);
        }
      }
    }
  }
  return found.Take();
}

}  // namespace pjrt_neuron::hlo
