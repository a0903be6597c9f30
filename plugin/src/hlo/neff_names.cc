// The NEFF naming rewrite and the entry signature reader (neff_names.h).
#include "hlo/neff_names.h"

#include <algorithm>
#include <map>

#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

// Field numbers hlo_fields.h does not carry (xla/service/hlo.proto, xla/xla_data.proto).
constexpr uint32_t kModuleSchedule = 7;
constexpr uint32_t kModuleAliases = 8;
constexpr uint32_t kAliasEntries = 1;  // HloInputOutputAliasProto
constexpr uint32_t kAliasOutputIndex = 1;
constexpr uint32_t kAliasParameter = 2;
constexpr uint32_t kAliasParameterIndex = 3;
constexpr uint32_t kAliasKind = 4;
constexpr uint64_t kMustAlias = 2;
constexpr uint32_t kMapKey = 1;
constexpr uint32_t kMapValue = 2;

constexpr char kInputAttribute[] = "neff_input_names";
constexpr char kOutputAttribute[] = "neff_output_names";

Status Malformed(const std::string& what) { return InvalidArgument("the HLO module is malformed: " + what); }

// Repeated int64 fields come packed or one per field.
bool AppendInts(const Field& f, std::vector<int64_t>* out) {
  if (f.wire_type == kVarint) {
    out->push_back(static_cast<int64_t>(f.varint));
    return true;
  }
  if (f.wire_type != kLengthDelimited) return false;
  WireReader packed(f.payload);
  uint64_t value;
  while (!packed.done()) {
    if (!packed.Varint(&value)) return false;
    out->push_back(static_cast<int64_t>(value));
  }
  return true;
}

struct ShapeTree {
  int element_type = 0;
  std::vector<int64_t> dims;
  std::vector<ShapeTree> elements;
  bool is_tuple() const { return element_type == kTupleElementType; }
};

bool ReadShapeTree(const std::string& bytes, ShapeTree* shape, int depth = 0) {
  if (depth > 64) return false;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == fields::kShapeElementType && f.wire_type == kVarint) shape->element_type = static_cast<int>(f.varint);
    if (f.number == fields::kShapeDimensions && !AppendInts(f, &shape->dims)) return false;
    if (f.number == fields::kShapeTupleShapes && f.wire_type == kLengthDelimited) {
      shape->elements.emplace_back();
      if (!ReadShapeTree(f.payload, &shape->elements.back(), depth + 1)) return false;
    }
  }
  return true;
}

void Leaves(const ShapeTree& shape, std::vector<ArraySignature>* out) {
  if (!shape.is_tuple()) {
    out->push_back({shape.element_type, shape.dims});
    return;
  }
  for (const ShapeTree& element : shape.elements) Leaves(element, out);
}

size_t LeafCount(const ShapeTree& shape) {
  if (!shape.is_tuple()) return 1;
  size_t count = 0;
  for (const ShapeTree& element : shape.elements) count += LeafCount(element);
  return count;
}

// The flat leaf index of a shape index, or -1 when it names no leaf.
int FlatLeafIndex(const ShapeTree& shape, const std::vector<int64_t>& index) {
  const ShapeTree* at = &shape;
  size_t flat = 0;
  for (int64_t i : index) {
    if (!at->is_tuple() || i < 0 || static_cast<size_t>(i) >= at->elements.size()) return -1;
    for (int64_t k = 0; k < i; ++k) flat += LeafCount(at->elements[k]);
    at = &at->elements[i];
  }
  return at->is_tuple() ? -1 : static_cast<int>(flat);
}

struct Instruction {
  std::vector<Field> fields;  // as read, for writing back
  std::string opcode;
  std::string name;
  std::string shape_bytes;
  ShapeTree shape;
  int64_t id = 0;
  int64_t parameter_number = 0;
  std::vector<int64_t> operand_ids;
};

bool ReadInstruction(const std::string& bytes, Instruction* instruction) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    switch (f.number) {
      case fields::kInstructionName: instruction->name = f.payload; break;
      case fields::kInstructionOpcode: instruction->opcode = f.payload; break;
      case fields::kInstructionShape:
        instruction->shape_bytes = f.payload;
        if (!ReadShapeTree(f.payload, &instruction->shape)) return false;
        break;
      case fields::kInstructionId: instruction->id = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionParameterNumber: instruction->parameter_number = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionOperandIds:
        if (!AppendInts(f, &instruction->operand_ids)) return false;
        break;
      default: break;
    }
    instruction->fields.push_back(f);
  }
  return true;
}

struct Computation {
  std::vector<Field> fields;  // everything but the instructions and the root id
  std::vector<Instruction> instructions;
  std::string name;
  int64_t id = 0;
  bool has_root = false;
  int64_t root_id = 0;
};

bool ReadComputation(const std::string& bytes, Computation* computation) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == fields::kComputationInstructions && f.wire_type == kLengthDelimited) {
      computation->instructions.emplace_back();
      if (!ReadInstruction(f.payload, &computation->instructions.back())) return false;
      continue;
    }
    if (f.number == fields::kComputationRootId && f.wire_type == kVarint) {
      computation->has_root = true;
      computation->root_id = static_cast<int64_t>(f.varint);
      continue;
    }
    if (f.number == fields::kComputationName) computation->name = f.payload;
    if (f.number == fields::kComputationId && f.wire_type == kVarint) computation->id = static_cast<int64_t>(f.varint);
    computation->fields.push_back(f);
  }
  return true;
}

struct Module {
  std::vector<Field> fields;  // in order; computations are re-read from them
  std::vector<Computation> computations;
  std::vector<size_t> computation_field;  // computations[i] is fields[computation_field[i]]
  size_t entry = 0;
  std::string name;
  std::string aliases;
};

Status ReadModule(const std::string& bytes, Module* module) {
  WireReader reader(bytes);
  Field f;
  std::string entry_name;
  bool has_entry_id = false;
  int64_t entry_id = 0;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("the module is not valid protobuf");
    if (f.number == fields::kModuleComputations && f.wire_type == kLengthDelimited) {
      module->computations.emplace_back();
      if (!ReadComputation(f.payload, &module->computations.back())) return Malformed("a computation is not valid");
      module->computation_field.push_back(module->fields.size());
    }
    if (f.number == fields::kModuleName && f.wire_type == kLengthDelimited) module->name = f.payload;
    if (f.number == fields::kModuleEntryName && f.wire_type == kLengthDelimited) entry_name = f.payload;
    if (f.number == fields::kModuleEntryComputationId && f.wire_type == kVarint) {
      has_entry_id = true;
      entry_id = static_cast<int64_t>(f.varint);
    }
    if (f.number == kModuleAliases && f.wire_type == kLengthDelimited) module->aliases = f.payload;
    module->fields.push_back(f);
  }
  if (module->computations.empty()) return Malformed("it has no computations");
  // The entry: by id, else by name, else the last computation (XLA writes the entry last).
  module->entry = module->computations.size() - 1;
  for (size_t i = 0; i < module->computations.size(); ++i) {
    const Computation& c = module->computations[i];
    if (has_entry_id ? c.id == entry_id : (!entry_name.empty() && c.name == entry_name)) module->entry = i;
  }
  return Status::Ok();
}

const Instruction* Root(const Computation& computation) {
  if (computation.instructions.empty()) return nullptr;
  if (!computation.has_root) return &computation.instructions.back();
  for (const Instruction& instruction : computation.instructions) {
    if (instruction.id == computation.root_id) return &instruction;
  }
  return nullptr;
}

Status ReadAliases(const std::string& bytes, const ShapeTree& result, EntrySignature* signature) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("input_output_alias is not valid protobuf");
    if (f.number != kAliasEntries || f.wire_type != kLengthDelimited) continue;
    std::vector<int64_t> output_index, parameter_index;
    OutputAlias alias;
    WireReader entry(f.payload);
    Field g;
    while (!entry.done()) {
      if (!entry.Next(&g)) return Malformed("an alias entry is not valid protobuf");
      if (g.number == kAliasOutputIndex && !AppendInts(g, &output_index)) return Malformed("an alias output index");
      if (g.number == kAliasParameterIndex && !AppendInts(g, &parameter_index)) return Malformed("an alias index");
      if (g.number == kAliasParameter && g.wire_type == kVarint) alias.parameter = static_cast<int>(g.varint);
      if (g.number == kAliasKind && g.wire_type == kVarint) alias.must_alias = g.varint == kMustAlias;
    }
    alias.output = FlatLeafIndex(result, output_index);
    if (alias.output < 0 || !parameter_index.empty() || alias.parameter < 0 ||
        static_cast<size_t>(alias.parameter) >= signature->parameters.size()) {
      return Malformed("an alias names no array output or parameter");
    }
    signature->aliases.push_back(alias);
  }
  return Status::Ok();
}

Status ReadSignature(const Module& module, EntrySignature* signature) {
  const Computation& entry = module.computations[module.entry];
  signature->module_name = module.name;
  std::map<int64_t, ArraySignature> parameters;
  for (const Instruction& instruction : entry.instructions) {
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
  const Instruction* root = Root(entry);
  if (root == nullptr) return Malformed("the entry computation has no root");
  Leaves(root->shape, &signature->outputs);
  return ReadAliases(module.aliases, root->shape, signature);
}

// FrontendAttributes with our key set to `value` and every other entry kept.
std::string WithAttribute(const std::vector<Field>& instruction_fields, const char* key, const std::string& value) {
  std::string attributes;
  for (const Field& f : instruction_fields) {
    if (f.number != fields::kInstructionFrontendAttributes) continue;
    WireReader reader(f.payload);
    Field entry;
    while (!reader.done() && reader.Next(&entry)) {
      std::string entry_key;
      WireReader entry_reader(entry.payload);
      Field g;
      while (!entry_reader.done() && entry_reader.Next(&g)) {
        if (g.number == kMapKey) entry_key = g.payload;
      }
      if (entry_key != kInputAttribute && entry_key != kOutputAttribute) attributes += entry.raw;
    }
  }
  std::string entry;
  AppendBytesField(&entry, kMapKey, key);
  AppendBytesField(&entry, kMapValue, value);
  AppendBytesField(&attributes, kMapKey, entry);
  return attributes;
}

std::string WriteInstruction(const Instruction& instruction, const char* key, const std::string& value,
                             const std::vector<int64_t>* new_operands) {
  std::string out;
  for (const Field& f : instruction.fields) {
    if (f.number == fields::kInstructionFrontendAttributes && key != nullptr) continue;
    if (f.number == fields::kInstructionOperandIds && new_operands != nullptr) continue;
    out += f.raw;
  }
  if (new_operands != nullptr) {
    std::string packed;
    for (int64_t id : *new_operands) AppendVarint(&packed, static_cast<uint64_t>(id));
    AppendBytesField(&out, fields::kInstructionOperandIds, packed);
  }
  if (key != nullptr) AppendBytesField(&out, fields::kInstructionFrontendAttributes, WithAttribute(instruction.fields, key, value));
  return out;
}

std::string CopyOf(const Instruction& source, int64_t id) {
  std::string out;
  AppendBytesField(&out, fields::kInstructionName, source.name + ".neff_copy");
  AppendBytesField(&out, fields::kInstructionOpcode, "copy");
  AppendBytesField(&out, fields::kInstructionShape, source.shape_bytes);
  AppendVarintField(&out, fields::kInstructionId, static_cast<uint64_t>(id));
  std::string operand;
  AppendVarint(&operand, static_cast<uint64_t>(source.id));
  AppendBytesField(&out, fields::kInstructionOperandIds, operand);
  return out;
}

std::string OutputNames(size_t count) {
  std::string names;
  for (size_t i = 0; i < count; ++i) names += (i == 0 ? "" : ",") + NeffOutputName(static_cast<int>(i));
  return names;
}

int64_t LargestId(const Module& module) {
  int64_t largest = 0;
  for (const Computation& c : module.computations) {
    for (const Instruction& instruction : c.instructions) largest = std::max(largest, instruction.id);
  }
  return largest;
}

// The entry computation, named, with copies in front of parameters the root returns.
std::string RewriteEntry(const Computation& entry, size_t num_outputs, int64_t* next_id, bool* added_copies) {
  const Instruction* root = Root(entry);
  std::map<int64_t, const Instruction*> parameters;
  for (const Instruction& instruction : entry.instructions) {
    if (instruction.opcode == "parameter") parameters[instruction.id] = &instruction;
  }
  std::string out;
  for (const Field& f : entry.fields) out += f.raw;
  int64_t root_id = root->id;
  for (const Instruction& instruction : entry.instructions) {
    const bool is_root = &instruction == root;
    if (instruction.opcode == "parameter") {
      const std::string name = NeffInputName(static_cast<int>(instruction.parameter_number));
      AppendBytesField(&out, fields::kComputationInstructions,
                       WriteInstruction(instruction, kInputAttribute, name, nullptr));
      if (!is_root) continue;
      // A root that is a parameter: its copy becomes the root.
      root_id = (*next_id)++;
      Instruction copy;
      ReadInstruction(CopyOf(instruction, root_id), &copy);
      AppendBytesField(&out, fields::kComputationInstructions,
                       WriteInstruction(copy, kOutputAttribute, OutputNames(num_outputs), nullptr));
      *added_copies = true;
      continue;
    }
    if (!is_root) {
      AppendBytesField(&out, fields::kComputationInstructions, WriteInstruction(instruction, nullptr, "", nullptr));
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
          AppendBytesField(&out, fields::kComputationInstructions, CopyOf(*parameter->second, at->second));
        }
        operand = at->second;
        changed = true;
      }
    }
    *added_copies |= changed;
    AppendBytesField(&out, fields::kComputationInstructions,
                     WriteInstruction(instruction, kOutputAttribute, OutputNames(num_outputs),
                                      changed ? &operands : nullptr));
  }
  AppendVarintField(&out, fields::kComputationRootId, static_cast<uint64_t>(root_id));
  return out;
}

}  // namespace

std::string NeffInputName(int parameter) { return "input" + std::to_string(parameter); }
std::string NeffOutputName(int output) { return "output" + std::to_string(output); }

StatusOr<EntrySignature> ReadEntrySignature(const std::string& bytes) {
  Module module;
  PN_RETURN_IF_ERROR(ReadModule(bytes, &module));
  EntrySignature signature;
  PN_RETURN_IF_ERROR(ReadSignature(module, &signature));
  return signature;
}

StatusOr<NeffNamedModule> WithNeffNames(const std::string& bytes) {
  Module module;
  PN_RETURN_IF_ERROR(ReadModule(bytes, &module));
  NeffNamedModule named;
  PN_RETURN_IF_ERROR(ReadSignature(module, &named.signature));
  int64_t next_id = LargestId(module) + 1;
  bool added_copies = false;
  const std::string entry =
      RewriteEntry(module.computations[module.entry], named.signature.outputs.size(), &next_id, &added_copies);
  const size_t entry_field = module.computation_field[module.entry];
  for (size_t i = 0; i < module.fields.size(); ++i) {
    const Field& f = module.fields[i];
    if (i == entry_field) {
      AppendBytesField(&named.module, fields::kModuleComputations, entry);
    } else if (f.number == kModuleSchedule && added_copies) {
      continue;  // a schedule would not list the new copies; the compiler makes its own
    } else {
      named.module += f.raw;
    }
  }
  return named;
}

}  // namespace pjrt_neuron::hlo
