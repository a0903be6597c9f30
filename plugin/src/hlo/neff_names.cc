// The NEFF naming rewrite and the entry signature reader (neff_names.h).
#include "hlo/neff_names.h"

#include <algorithm>
#include <map>

#include "hlo/module_view.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;


constexpr char kInputAttribute[] = "neff_input_names";
constexpr char kOutputAttribute[] = "neff_output_names";

Status Malformed(const std::string& what) { return InvalidArgument("the HLO module is malformed: " + what); }

size_t LeafCount(const ShapeView& shape) { return shape.Leaves().size(); }

// The flat leaf index of a shape index, or -1 when it names no leaf.
int FlatLeafIndex(const ShapeView& shape, const std::vector<int64_t>& index) {
  const ShapeView* at = &shape;
  size_t flat = 0;
  for (int64_t i : index) {
    if (!at->is_tuple() || i < 0 || static_cast<size_t>(i) >= at->tuple_shapes.size()) return -1;
    for (int64_t k = 0; k < i; ++k) flat += LeafCount(at->tuple_shapes[k]);
    at = &at->tuple_shapes[i];
  }
  return at->is_tuple() ? -1 : static_cast<int>(flat);
}

StatusOr<ModuleView> ReadModule(const std::string& bytes) {
  StatusOr<ModuleView> module = ModuleView::Read(bytes);
  if (!module.ok()) return Malformed(module.status().message());
  return module;
}

Status ReadAliases(const ModuleView& module, const ShapeView& result, EntrySignature* signature) {
  for (const OutputAliasView& entry : module.aliases()) {
    OutputAlias alias;
    alias.parameter = static_cast<int>(entry.parameter_number);
    alias.must_alias = entry.kind == fields::kAliasKindMustAlias;
    alias.output = FlatLeafIndex(result, entry.output_index);
    if (alias.output < 0 || !entry.parameter_index.empty() || alias.parameter < 0 ||
        static_cast<size_t>(alias.parameter) >= signature->parameters.size()) {
      return Malformed("an alias names no array output or parameter");
    }
    signature->aliases.push_back(alias);
  }
  return Status::Ok();
}

Status ReadSignature(const ModuleView& module, EntrySignature* signature) {
  if (module.computations().empty()) return Malformed("it has no computations");
  const ComputationView& entry = *module.entry();
  signature->module_name = module.name();
  std::map<int64_t, ArraySignature> parameters;
  for (const InstructionView& instruction : entry.instructions) {
    if (instruction.opcode != "parameter") continue;
    if (instruction.shape.is_tuple()) {
      return Unimplemented("parameter " + std::to_string(instruction.parameter_number) +
                           " is a tuple; the Neuron engine takes array parameters only");
    }
    if (!parameters.emplace(instruction.parameter_number, ArraySignature{instruction.shape.element_type,
                                                                         instruction.shape.dims}).second) {
      return Malformed("parameter " + std::to_string(instruction.parameter_number) + " appears twice");
    }
  }
  for (const auto& [number, parameter] : parameters) {
    if (number != static_cast<int64_t>(signature->parameters.size())) {
      return Malformed("parameter " + std::to_string(signature->parameters.size()) + " is missing");
    }
    signature->parameters.push_back(parameter);
  }
  const InstructionView* root = entry.Root();
  if (root == nullptr) return Malformed("the entry computation has no root");
  for (const ShapeView* leaf : root->shape.Leaves()) signature->outputs.push_back({leaf->element_type, leaf->dims});
  return ReadAliases(module, root->shape, signature);
}

// FrontendAttributes with our key set to `value` and every other entry kept.
std::string WithAttribute(const std::vector<FrontendAttribute>& kept, const char* key, const std::string& value) {
  std::string attributes;
  for (const FrontendAttribute& attribute : kept) {
    if (attribute.key != kInputAttribute && attribute.key != kOutputAttribute) attributes += attribute.raw;
  }
  std::string entry;
  AppendBytesField(&entry, fields::kMapKey, key);
  AppendBytesField(&entry, fields::kMapValue, value);
  AppendBytesField(&attributes, fields::kMapKey, entry);
  return attributes;
}

std::string WriteInstruction(const ModuleView& module, const InstructionView& instruction, const char* key,
                             const std::string& value, const std::vector<int64_t>* new_operands) {
  std::string out;
  for (const FieldSpan& f : instruction.fields) {
    if (f.number == fields::kInstructionFrontendAttributes && key != nullptr) continue;
    if (f.number == fields::kInstructionOperandIds && new_operands != nullptr) continue;
    out += module.Bytes(f.raw);
  }
  if (new_operands != nullptr) AppendBytesField(&out, fields::kInstructionOperandIds, PackedVarints(*new_operands));
  if (key != nullptr) {
    AppendBytesField(&out, fields::kInstructionFrontendAttributes,
                     WithAttribute(instruction.frontend_attributes, key, value));
  }
  return out;
}

std::string CopyOf(const InstructionView& source, int64_t id) {
  std::string out;
  AppendBytesField(&out, fields::kInstructionName, source.name + ".neff_copy");
  AppendBytesField(&out, fields::kInstructionOpcode, "copy");
  AppendBytesField(&out, fields::kInstructionShape, source.shape.bytes);
  AppendVarintField(&out, fields::kInstructionId, static_cast<uint64_t>(id));
  AppendBytesField(&out, fields::kInstructionOperandIds, PackedVarints({source.id}));
  return out;
}

std::string OutputNames(size_t count) {
  std::string names;
  for (size_t i = 0; i < count; ++i) names += (i == 0 ? "" : ",") + NeffOutputName(static_cast<int>(i));
  return names;
}

// The entry computation, named, with copies in front of parameters the root returns: its
// other fields first, then its instructions, then its root id.
std::string RewriteEntry(const ModuleView& module, const ComputationView& entry, size_t num_outputs, int64_t* next_id,
                         bool* added_copies) {
  const InstructionView* root = entry.Root();
  std::map<int64_t, const InstructionView*> parameters;
  for (const InstructionView& instruction : entry.instructions) {
    if (instruction.opcode == "parameter") parameters[instruction.id] = &instruction;
  }
  std::string out = module.Concat(entry.fields, {fields::kComputationInstructions, fields::kComputationRootId});
  auto append = [&](const std::string& instruction) {
    AppendBytesField(&out, fields::kComputationInstructions, instruction);
  };
  int64_t root_id = root->id;
  for (const InstructionView& instruction : entry.instructions) {
    const bool is_root = &instruction == root;
    if (instruction.opcode == "parameter") {
      append(WriteInstruction(module, instruction, kInputAttribute,
                              NeffInputName(static_cast<int>(instruction.parameter_number)), nullptr));
      if (!is_root) continue;
      // A root that is a parameter: its copy becomes the root.
      root_id = (*next_id)++;
      std::string copy = CopyOf(instruction, root_id);
      AppendBytesField(&copy, fields::kInstructionFrontendAttributes,
                       WithAttribute({}, kOutputAttribute, OutputNames(num_outputs)));
      append(copy);
      *added_copies = true;
      continue;
    }
    if (!is_root) {
      append(WriteInstruction(module, instruction, nullptr, "", nullptr));
      continue;
    }
    std::vector<int64_t> operands = instruction.operand_ids;
    bool changed = false;
    if (instruction.opcode == "tuple") {
      std::map<int64_t, int64_t> copy_of;  // parameter id -> its copy's id
      for (int64_t& operand : operands) {
        auto parameter = parameters.find(operand);
        if (parameter == parameters.end()) continue;
        auto [at, inserted] = copy_of.emplace(operand, 0);
        if (inserted) {
          at->second = (*next_id)++;
          append(CopyOf(*parameter->second, at->second));
        }
        operand = at->second;
        changed = true;
      }
    }
    *added_copies |= changed;
    append(WriteInstruction(module, instruction, kOutputAttribute, OutputNames(num_outputs),
                            changed ? &operands : nullptr));
  }
  AppendVarintField(&out, fields::kComputationRootId, static_cast<uint64_t>(root_id));
  return out;
}

}  // namespace

std::string NeffInputName(int parameter) { return "input" + std::to_string(parameter); }
std::string NeffOutputName(int output) { return "output" + std::to_string(output); }

StatusOr<EntrySignature> ReadEntrySignature(const std::string& bytes) {
  PN_ASSIGN_OR_RETURN(ModuleView module, ReadModule(bytes));
  return ReadEntrySignature(module);
}

StatusOr<EntrySignature> ReadEntrySignature(const ModuleView& module) {
  EntrySignature signature;
  PN_RETURN_IF_ERROR(ReadSignature(module, &signature));
  return signature;
}

StatusOr<NeffNamedModule> WithNeffNames(const std::string& bytes) {
  PN_ASSIGN_OR_RETURN(ModuleView module, ReadModule(bytes));
  return WithNeffNames(module);
}

StatusOr<NeffNamedModule> WithNeffNames(const ModuleView& module) {
  NeffNamedModule named;
  PN_RETURN_IF_ERROR(ReadSignature(module, &named.signature));
  int64_t next_id = module.LargestInstructionId() + 1;
  bool added_copies = false;
  const ComputationView& entry = *module.entry();
  std::string entry_field;
  AppendBytesField(&entry_field, fields::kModuleComputations,
                   RewriteEntry(module, entry, named.signature.outputs.size(), &next_id, &added_copies));
  ModuleEditor editor(module);
  for (const FieldSpan& f : module.fields()) {
    if (f.raw.offset == entry.field.offset) editor.Replace(f, entry_field);
    // A schedule would not list the new copies; the compiler makes its own.
    if (f.number == fields::kModuleSchedule && added_copies) editor.Replace(f, "");
  }
  named.module = editor.Write();
  return named;
}

}  // namespace pjrt_neuron::hlo
