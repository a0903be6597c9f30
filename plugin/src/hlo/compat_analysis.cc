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

#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

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

struct Shape {
  std::vector<int> element_types;  // every leaf of a tuple
  bool is_tuple = false;
  bool dynamic = false;
};

void ReadShape(const std::string& bytes, Shape* shape) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kShapeElementType && f.wire_type == kVarint) {
      if (static_cast<int>(f.varint) == kTuple) {
        shape->is_tuple = true;
      } else {
        shape->element_types.push_back(static_cast<int>(f.varint));
      }
    } else if (f.number == fields::kShapeTupleShapes && f.wire_type == kLengthDelimited) {
      ReadShape(f.payload, shape);
    } else if (f.number == fields::kShapeIsDynamicDimension) {
      if (f.wire_type == kVarint) {
        shape->dynamic |= f.varint != 0;
      } else if (f.wire_type == kLengthDelimited) {
        for (char c : f.payload) shape->dynamic |= c != 0;
      }
    }
  }
}

struct Instruction {
  int64_t id = 0;
  std::vector<int64_t> operand_ids;
  std::string opcode;
  Shape shape;
  std::string op_name;
  std::string source_file;
  int source_line = 0;
  int64_t stack_frame_id = 0;  // newer XLA: the location is in the module's stack frame index
  std::string custom_call_target;
  uint64_t custom_call_api_version = 0;
  std::string backend_config;
  std::string comparison_direction;
  std::vector<int64_t> called_computations;
  bool literal_beyond_int32 = false;  // a constant holding an int64 outside the int32 range
};

struct Computation {
  int64_t id = 0;
  std::vector<Instruction> instructions;
};

void ReadMetadata(const std::string& bytes, Instruction* instruction) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kMetadataOpName && f.wire_type == kLengthDelimited) instruction->op_name = f.payload;
    if (f.number == fields::kMetadataSourceFile && f.wire_type == kLengthDelimited) instruction->source_file = f.payload;
    if (f.number == fields::kMetadataSourceLine && f.wire_type == kVarint) {
      instruction->source_line = static_cast<int>(f.varint);
    }
    if (f.number == fields::kMetadataStackFrameId && f.wire_type == kVarint) {
      instruction->stack_frame_id = static_cast<int64_t>(f.varint);
    }
  }
}

// A repeated int64 field, packed or not.
void ReadIds(const Field& f, std::vector<int64_t>* ids) {
  if (f.wire_type == kVarint) {
    ids->push_back(static_cast<int64_t>(f.varint));
  } else if (f.wire_type == kLengthDelimited) {
    WireReader packed(f.payload);
    uint64_t id;
    while (!packed.done() && packed.Varint(&id)) ids->push_back(static_cast<int64_t>(id));
  }
}

bool LiteralBeyondInt32(const std::string& literal) {
  WireReader reader(literal);
  Field f;
  std::vector<int64_t> values;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kLiteralS64s) ReadIds(f, &values);
  }
  for (int64_t v : values) {
    if (v < INT32_MIN || v > INT32_MAX) return true;
  }
  return false;
}

bool ReadInstruction(const std::string& bytes, Instruction* instruction) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    switch (f.number) {
      case fields::kInstructionOpcode: instruction->opcode = f.payload; break;
      case fields::kInstructionShape: ReadShape(f.payload, &instruction->shape); break;
      case fields::kInstructionMetadata: ReadMetadata(f.payload, instruction); break;
      case fields::kInstructionLiteral: instruction->literal_beyond_int32 = LiteralBeyondInt32(f.payload); break;
      case fields::kInstructionCustomCallTarget: instruction->custom_call_target = f.payload; break;
      case fields::kInstructionCustomCallApiVersion: instruction->custom_call_api_version = f.varint; break;
      case fields::kInstructionBackendConfig: instruction->backend_config = f.payload; break;
      case fields::kInstructionComparisonDirection: instruction->comparison_direction = f.payload; break;
      case fields::kInstructionId: instruction->id = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionOperandIds: ReadIds(f, &instruction->operand_ids); break;
      case fields::kInstructionCalledComputations: ReadIds(f, &instruction->called_computations); break;
      default: break;
    }
  }
  return true;
}

// HloModuleProto.stack_frame_index: where newer XLA keeps source locations (OpMetadata
// names a frame by id instead of carrying source_file / source_line itself).
struct FrameIndex {
  std::vector<std::string> file_names;
  std::vector<std::pair<int64_t, int>> file_locations;  // (file name id, line)
  std::vector<int64_t> frames;                          // file location id of each frame
};

void ReadFrameIndex(const std::string& bytes, FrameIndex* index) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.wire_type != kLengthDelimited) continue;
    if (f.number == fields::kFrameIndexFileNames) index->file_names.push_back(f.payload);
    if (f.number != fields::kFrameIndexFileLocations && f.number != fields::kFrameIndexStackFrames) continue;
    const bool location = f.number == fields::kFrameIndexFileLocations;
    const uint32_t id_field = location ? fields::kFileLocationFileNameId : fields::kStackFrameFileLocationId;
    WireReader inner(f.payload);
    Field g;
    int64_t id = 0;
    int line = 0;
    while (!inner.done() && inner.Next(&g)) {
      if (g.wire_type != kVarint) continue;
      if (g.number == id_field) id = static_cast<int64_t>(g.varint);
      if (location && g.number == fields::kFileLocationLine) line = static_cast<int>(g.varint);
    }
    if (location) {
      index->file_locations.emplace_back(id, line);
    } else {
      index->frames.push_back(id);
    }
  }
}

// The innermost frame of an instruction's stack: the user's line, as source_file/line were.
void ResolveFrame(const FrameIndex& index, Instruction* instruction) {
  if (!instruction->source_file.empty() || instruction->stack_frame_id <= 0) return;
  const size_t frame = static_cast<size_t>(instruction->stack_frame_id - 1);
  if (frame >= index.frames.size()) return;
  const int64_t location_id = index.frames[frame];
  if (location_id <= 0 || static_cast<size_t>(location_id) > index.file_locations.size()) return;
  const auto& [file_id, line] = index.file_locations[static_cast<size_t>(location_id - 1)];
  if (file_id <= 0 || static_cast<size_t>(file_id) > index.file_names.size()) return;
  instruction->source_file = index.file_names[static_cast<size_t>(file_id - 1)];
  instruction->source_line = line;
}

struct Module {
  std::string name;
  bool is_dynamic = false;
  std::vector<Computation> computations;
};

Status ReadModule(const std::string& bytes, Module* module) {
  WireReader reader(bytes);
  Field f;
  FrameIndex frames;
  while (!reader.done()) {
    if (!reader.Next(&f)) return InvalidArgument("the program is not a valid HloModuleProto");
    if (f.number == fields::kModuleName && f.wire_type == kLengthDelimited) module->name = f.payload;
    if (f.number == fields::kModuleIsDynamic && f.wire_type == kVarint) module->is_dynamic = f.varint != 0;
    if (f.number == fields::kModuleStackFrameIndex && f.wire_type == kLengthDelimited) ReadFrameIndex(f.payload, &frames);
    if (f.number != fields::kModuleComputations || f.wire_type != kLengthDelimited) continue;
    Computation computation;
    WireReader inner(f.payload);
    Field g;
    while (!inner.done()) {
      if (!inner.Next(&g)) return InvalidArgument("the program is not a valid HloModuleProto");
      if (g.number == fields::kComputationId && g.wire_type == kVarint) computation.id = static_cast<int64_t>(g.varint);
      if (g.number == fields::kComputationInstructions && g.wire_type == kLengthDelimited) {
        Instruction instruction;
        if (!ReadInstruction(g.payload, &instruction)) return InvalidArgument("the program has a malformed instruction");
        computation.instructions.push_back(std::move(instruction));
      }
    }
    module->computations.push_back(std::move(computation));
  }
  for (Computation& computation : module->computations) {
    for (Instruction& instruction : computation.instructions) ResolveFrame(frames, &instruction);
  }
  return Status::Ok();
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
  void Add(const Check& check, const Instruction& at, bool beyond_int32 = false) {
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
bool ComparatorIsPlain(const Computation& comparator, const std::map<int64_t, const Computation*>& by_id, int depth) {
  if (depth > 8) return true;
  std::map<int64_t, const Instruction*> by_instruction;
  for (const Instruction& i : comparator.instructions) by_instruction[i.id] = &i;
  auto is_constant = [&](int64_t id) {
    auto it = by_instruction.find(id);
    return it != by_instruction.end() && it->second->opcode == "constant";
  };
  for (const Instruction& i : comparator.instructions) {
    for (int64_t called : i.called_computations) {  // the compiler moves comparator bodies into fusions
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
  const std::string module_bytes = HloModuleBytes(bytes, with_config);
  Module module;
  PN_RETURN_IF_ERROR(ReadModule(module_bytes, &module));
  std::map<int64_t, const Computation*> by_id;
  for (const Computation& c : module.computations) by_id[c.id] = &c;

  // Which s64 values can leave the int32 range: those computed from an int64 constant outside
  // it. Computations and their instructions come in post order, so operands and callees are
  // seen first. Values from parameters are not known when compiling and are not counted.
  std::set<int64_t> computations_beyond_int32;
  Collector found;
  for (const Computation& computation : module.computations) {
    std::set<int64_t> beyond_int32;
    for (const Instruction& i : computation.instructions) {
      bool int64_out = false;
      for (int t : i.shape.element_types) int64_out |= t == kS64;
      bool beyond = i.literal_beyond_int32;
      for (int64_t id : i.operand_ids) beyond |= beyond_int32.count(id) > 0;
      for (int64_t id : i.called_computations) beyond |= computations_beyond_int32.count(id) > 0;
      beyond &= int64_out;
      if (beyond) {
        beyond_int32.insert(i.id);
        computations_beyond_int32.insert(computation.id);
      }
      bool f64 = false, complex = false, fp8 = false, int64 = false;
      for (int t : i.shape.element_types) {
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
        bool integer = !i.shape.element_types.empty();
        for (int t : i.shape.element_types) integer &= IsInteger(t);
        if (integer) found.Add(kIntegerDot, i);
      }
      if (i.opcode == "reduce" && i.shape.is_tuple) found.Add(kVariadicReduce, i);
      if (i.opcode == "sort") {
        for (int64_t id : i.called_computations) {
          auto it = by_id.find(id);
          if (it != by_id.end() && !ComparatorIsPlain(*it->second, by_id, 0)) found.Add(kSortComparator, i);
        }
      }
    }
  }
  return found.Take();
}

}  // namespace pjrt_neuron::hlo
