// Takes output placement annotations out of a program (output_placement.h).
#include "hlo/output_placement.h"

#include <map>

#include "hlo/module_view.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;
constexpr char kPlacementAttribute[] = "_xla_buffer_placement";

// The instruction with each operand id in `replaced` swapped for its replacement.
std::string WithOperands(const ModuleView& view, const InstructionView& instruction,
                         const std::map<int64_t, int64_t>& replaced) {
  std::string out;
  bool written = false;
  for (const FieldSpan& f : instruction.fields) {
    if (f.number != fields::kInstructionOperandIds) {
      out += view.Bytes(f.raw);
      continue;
    }
    if (written) continue;  // unpacked ids: all written at the first
    written = true;
    std::vector<int64_t> operands;
    for (int64_t id : instruction.operand_ids) {
      auto found = replaced.find(id);
      operands.push_back(found != replaced.end() ? found->second : id);
    }
    AppendBytesField(&out, fields::kInstructionOperandIds, PackedVarints(operands));
  }
  return out;
}

bool IsAnnotation(const InstructionView& i) {
  return i.opcode == "custom-call" && i.custom_call_target == kAnnotateDevicePlacement;
}

const std::string& Placement(const InstructionView& i) {
  static const std::string kNone;
  const FrontendAttribute* placement = i.Attribute(kPlacementAttribute);
  return placement == nullptr ? kNone : placement->value;
}

// Steps between an output and its annotation that only pass a value on.
bool PassesValueOn(const InstructionView& i) {
  if (i.operand_ids.size() != 1) return false;
  const std::string& target = i.custom_call_target;
  if (i.opcode == "custom-call") return target == "xla.sdy.FuncResultSharding" || target == "Sharding";
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
  StatusOr<ModuleView> view = ModuleView::Read(module);
  if (!view.ok()) return InvalidArgument("the program is not a readable HloModuleProto");
  return StripOutputPlacements(view.value());
}

PlacedOutputs StripOutputPlacements(const ModuleView& view) {
  ModuleEditor editor(view);
  PlacedOutputs placed;
  for (const FieldSpan& f : view.fields()) {
    if (f.number != fields::kModuleHostProgramShape) continue;
    std::string program_shape;
    AppendBytesField(&program_shape, fields::kModuleHostProgramShape,
                     ProgramShapeWithoutMemorySpaces(std::string(view.Bytes(f.payload))));
    editor.Replace(f, program_shape);
  }
  for (const ComputationView& computation : view.computations()) {
    std::map<int64_t, int64_t> replaced;  // annotation -> what it annotates
    for (const InstructionView& i : computation.instructions) {
      if (IsAnnotation(i) && i.operand_ids.size() == 1) replaced[i.id] = i.operand_ids[0];
    }
    const int64_t root = computation.has_root_id ? computation.root_id : -1;
    if (computation.name == view.entry_name() && computation.Find(root) != nullptr) {
      // Each output's placement: follow it back through sharding marks to its annotation.
      auto placement_of = [&](int64_t id) {
        for (const InstructionView* i = computation.Find(id); i != nullptr; i = computation.Find(i->operand_ids[0])) {
          if (IsAnnotation(*i)) return Placement(*i);
          if (!PassesValueOn(*i)) break;
        }
        return std::string();
      };
      const InstructionView& root_instruction = *computation.Find(root);
      if (root_instruction.opcode == "tuple") {
        for (int64_t id : root_instruction.operand_ids) placed.output_memory_kinds.push_back(placement_of(id));
      } else {
        placed.output_memory_kinds.push_back(placement_of(root));
      }
    }
    for (const FieldSpan& c : computation.fields) {
      if (c.number != fields::kComputationRootId) continue;
      auto found = replaced.find(root);
      std::string root_field;
      AppendVarintField(&root_field, fields::kComputationRootId,
                        static_cast<uint64_t>(found != replaced.end() ? found->second : root));
      editor.Replace(c, root_field);
    }
    for (const InstructionView& i : computation.instructions) {
      if (replaced.count(i.id)) {
        editor.Replace(i, {});
      } else if (!replaced.empty()) {
        editor.Replace(i, {WithOperands(view, i, replaced)});
      }
    }
  }
  placed.module = editor.Write();
  return placed;
}

}  // namespace pjrt_neuron::hlo
