// Takes output placement annotations out of a program (output_placement.h).
#include "hlo/output_placement.h"

#include <map>

#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;
constexpr char kPlacementAttribute[] = "_xla_buffer_placement";

struct Instruction {
  std::string bytes;
  int64_t id = -1;
  std::string opcode;
  std::string target;
  std::vector<int64_t> operands;
  std::string placement;
};

std::vector<int64_t> PackedInts(const std::string& payload) {
  std::vector<int64_t> out;
  WireReader reader(payload);
  uint64_t value;
  while (!reader.done() && reader.Varint(&value)) out.push_back(static_cast<int64_t>(value));
  return out;
}

std::string Attribute(const std::string& attributes, const std::string& key) {
  WireReader reader(attributes);
  Field entry;
  while (!reader.done() && reader.Next(&entry)) {
    if (entry.number != 1) continue;
    WireReader pair(entry.payload);
    Field f;
    std::string k, v;
    while (!pair.done() && pair.Next(&f)) {
      if (f.number == 1) k = f.payload;
      if (f.number == 2) v = f.payload;
    }
    if (k == key) return v;
  }
  return "";
}

bool Read(const std::string& bytes, Instruction* out) {
  out->bytes = bytes;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == fields::kInstructionId) out->id = static_cast<int64_t>(f.varint);
    if (f.number == fields::kInstructionOpcode) out->opcode = f.payload;
    if (f.number == fields::kInstructionCustomCallTarget) out->target = f.payload;
    if (f.number == fields::kInstructionOperandIds) {
      if (f.wire_type == kLengthDelimited) {
        for (int64_t id : PackedInts(f.payload)) out->operands.push_back(id);
      } else {
        out->operands.push_back(static_cast<int64_t>(f.varint));
      }
    }
    if (f.number == fields::kInstructionFrontendAttributes) out->placement = Attribute(f.payload, kPlacementAttribute);
  }
  return true;
}

// The instruction with each operand id in `replaced` swapped for its replacement.
std::string WithOperands(const Instruction& instruction, const std::map<int64_t, int64_t>& replaced) {
  std::string out;
  WireReader reader(instruction.bytes);
  Field f;
  bool written = false;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number != fields::kInstructionOperandIds) {
      out += f.raw;
      continue;
    }
    if (written) continue;  // unpacked ids: all written at the first
    written = true;
    std::string packed;
    for (int64_t id : instruction.operands) {
      auto found = replaced.find(id);
      AppendVarint(&packed, static_cast<uint64_t>(found != replaced.end() ? found->second : id));
    }
    AppendBytesField(&out, fields::kInstructionOperandIds, packed);
  }
  return out;
}

// Steps between an output and its annotation that only pass a value on.
bool PassesValueOn(const Instruction& i) {
  if (i.operands.size() != 1) return false;
  if (i.opcode == "custom-call") return i.target == "xla.sdy.FuncResultSharding" || i.target == "Sharding";
  return i.opcode == "copy" || i.opcode == "bitcast" || i.opcode == "reshape";
}

// A shape with every layout's memory space dropped (the host memory space S(5)).
std::string WithoutMemorySpaces(const std::string& shape) {
  std::string out;
  WireReader reader(shape);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kShapeTupleShapes) {
      AppendBytesField(&out, fields::kShapeTupleShapes, WithoutMemorySpaces(f.payload));
    } else if (f.number == fields::kShapeLayout) {
      std::string layout;
      WireReader layout_reader(f.payload);
      Field g;
      while (!layout_reader.done() && layout_reader.Next(&g)) {
        if (g.number != fields::kLayoutMemorySpace) layout += g.raw;
      }
      AppendBytesField(&out, fields::kShapeLayout, layout);
    } else {
      out += f.raw;
    }
  }
  return out;
}

std::string ProgramShapeWithoutMemorySpaces(const std::string& program_shape) {
  std::string out;
  WireReader reader(program_shape);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kProgramShapeParameters || f.number == fields::kProgramShapeResult) {
      AppendBytesField(&out, f.number, WithoutMemorySpaces(f.payload));
    } else {
      out += f.raw;
    }
  }
  return out;
}

}  // namespace

StatusOr<PlacedOutputs> StripOutputPlacements(const std::string& module) {
  std::string entry_name;
  std::vector<Field> module_fields;
  {
    WireReader reader(module);
    Field f;
    while (!reader.done()) {
      if (!reader.Next(&f)) return InvalidArgument("the program is not a readable HloModuleProto");
      if (f.number == fields::kModuleEntryName) entry_name = f.payload;
      module_fields.push_back(f);
    }
  }
  PlacedOutputs placed;
  std::string out;
  for (const Field& f : module_fields) {
    if (f.number == fields::kModuleHostProgramShape) {
      AppendBytesField(&out, fields::kModuleHostProgramShape, ProgramShapeWithoutMemorySpaces(f.payload));
      continue;
    }
    if (f.number != fields::kModuleComputations) {
      out += f.raw;
      continue;
    }
    std::vector<Field> computation_fields;
    std::vector<Instruction> instructions;
    std::string name;
    int64_t root = -1;
    WireReader reader(f.payload);
    Field g;
    while (!reader.done()) {
      if (!reader.Next(&g)) return InvalidArgument("the program has an unreadable computation");
      if (g.number == fields::kComputationName) name = g.payload;
      if (g.number == fields::kComputationRootId) root = static_cast<int64_t>(g.varint);
      if (g.number == fields::kComputationInstructions) {
        Instruction instruction;
        if (!Read(g.payload, &instruction)) return InvalidArgument("the program has an unreadable instruction");
        instructions.push_back(std::move(instruction));
      }
      computation_fields.push_back(g);
    }
    std::map<int64_t, const Instruction*> by_id;
    std::map<int64_t, int64_t> replaced;  // annotation -> what it annotates
    for (const Instruction& i : instructions) {
      by_id[i.id] = &i;
      if (i.opcode == "custom-call" && i.target == kAnnotateDevicePlacement && i.operands.size() == 1) {
        replaced[i.id] = i.operands[0];
      }
    }
    if (name == entry_name && by_id.count(root)) {
      // Each output's placement: follow it back through sharding marks to its annotation.
      auto placement_of = [&](int64_t id) {
        for (auto it = by_id.find(id); it != by_id.end(); it = by_id.find(it->second->operands[0])) {
          const Instruction& i = *it->second;
          if (i.opcode == "custom-call" && i.target == kAnnotateDevicePlacement) return i.placement;
          if (!PassesValueOn(i)) break;
        }
        return std::string();
      };
      const Instruction& root_instruction = *by_id[root];
      if (root_instruction.opcode == "tuple") {
        for (int64_t id : root_instruction.operands) placed.output_memory_kinds.push_back(placement_of(id));
      } else {
        placed.output_memory_kinds.push_back(placement_of(root));
      }
    }
    std::string computation;
    for (const Field& c : computation_fields) {
      if (c.number == fields::kComputationRootId) {
        auto found = replaced.find(root);
        AppendVarintField(&computation, fields::kComputationRootId,
                          static_cast<uint64_t>(found != replaced.end() ? found->second : root));
      } else if (c.number == fields::kComputationInstructions) {
        Instruction i;
        Read(c.payload, &i);
        if (replaced.count(i.id)) continue;
        AppendBytesField(&computation, fields::kComputationInstructions, replaced.empty() ? c.payload : WithOperands(i, replaced));
      } else {
        computation += c.raw;
      }
    }
    AppendBytesField(&out, fields::kModuleComputations, computation);
  }
  placed.module = std::move(out);
  return placed;
}

}  // namespace pjrt_neuron::hlo
