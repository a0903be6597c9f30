// One decoded view of a serialized HloModuleProto: its computations and instructions (opcode,
// shape, operands, users, callees and the attributes the passes in hlo/ read), with where each
// field sits in the bytes, so a pass that rewrites the program edits in place without decoding
// it again. Every pass reads programs through this view; a fix to how a field is read reaches all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "hlo/hlo_fields.h"

namespace pjrt_neuron::hlo {

// Bytes of the module: [offset, offset + size).
struct Span {
  size_t offset = 0;
  size_t size = 0;
};

// One field of a message.
struct FieldSpan {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  Span raw;      // tag included
  Span payload;  // a length-delimited field's bytes
};

struct ShapeView {
  int element_type = 0;  // xla.PrimitiveType
  std::vector<int64_t> dims;
  std::vector<ShapeView> tuple_shapes;
  bool dynamic = false;  // a dimension here or in an element is dynamic
  std::string bytes;     // the serialized ShapeProto, to write it unchanged

  bool is_tuple() const { return element_type == kTupleElementType; }
  // The arrays of a tuple, depth first; an array shape is its own one leaf.
  std::vector<const ShapeView*> Leaves() const;
};

struct FrontendAttribute {
  std::string key;
  std::string value;
  std::string raw;  // the map entry as serialized (tag included)
};

struct InstructionView {
  std::string name;
  std::string opcode;
  int64_t id = 0;
  ShapeView shape;
  std::vector<int64_t> operand_ids;
  std::vector<size_t> users;  // indices into the computation's instructions, in order
  std::vector<int64_t> called_computation_ids;
  int64_t parameter_number = 0;
  uint64_t channel_id = 0;
  std::string custom_call_target;
  uint64_t custom_call_api_version = 0;
  std::string backend_config;
  std::string comparison_direction;
  std::vector<int64_t> dimensions;
  std::vector<int64_t> dot_lhs_contracting;
  std::vector<int64_t> dot_lhs_batch;
  int64_t convolution_kernel_output_feature = 0;
  std::string participants;  // replica groups, source-target pairs, device list: the fields as serialized
  int group_size = 0;        // participants in each group of a collective; 0: every device
  bool literal_beyond_int32 = false;  // an s64 constant holding a value outside the int32 range
  std::vector<FrontendAttribute> frontend_attributes;
  // OpMetadata; newer XLA names a stack frame instead, resolved here through the module's index.
  std::string op_name;
  std::string source_file;
  int source_line = 0;
  int64_t stack_frame_id = 0;  // 1-based; 0: none

  std::vector<FieldSpan> fields;  // every field, in order
  Span field;                     // the instruction as a field of its computation
  Span bytes;                     // the HloInstructionProto

  const FrontendAttribute* Attribute(const std::string& key) const;
};

struct ComputationView {
  std::string name;
  int64_t id = 0;
  bool has_root_id = false;
  int64_t root_id = 0;
  std::vector<InstructionView> instructions;  // in order (XLA writes operands first)
  std::vector<FieldSpan> fields;              // every field, in order, instructions included
  Span field;                                 // the computation as a field of the module

  const InstructionView* Find(int64_t instruction_id) const;
  // The root by id, else (no root id) the last instruction; null when neither is there.
  const InstructionView* Root() const;

 private:
  friend class ModuleReader;
  std::unordered_map<int64_t, size_t> by_id_;
};

// HloInputOutputAliasProto.AliasEntryProto.
struct OutputAliasView {
  std::vector<int64_t> output_index;
  int64_t parameter_number = 0;
  std::vector<int64_t> parameter_index;
  uint64_t kind = 0;  // 2: must alias
};

class ModuleView {
 public:
  // INVALID_ARGUMENT saying what is malformed (any field of the module, its computations and
  // instructions, or of the messages decoded for them).
  static StatusOr<ModuleView> Read(std::string module);
  // A serialized "hlo" program, or "hlo_with_config" when `with_config`.
  static StatusOr<ModuleView> ReadProgram(const std::string& program, bool with_config);
  // A program by its format's name; INVALID_ARGUMENT for a format other than "hlo" and
  // "hlo_with_config", and for a program without a module.
  static StatusOr<ModuleView> ReadHloProgram(const std::string& program, const std::string& format);

  const std::string& bytes() const { return bytes_; }
  std::string_view Bytes(Span span) const { return std::string_view(bytes_).substr(span.offset, span.size); }
  // The fields in order, without those numbered in `drop`: a message rewritten field by field.
  std::string Concat(const std::vector<FieldSpan>& fields, std::initializer_list<uint32_t> drop = {}) const;

  const std::string& name() const { return name_; }
  const std::string& entry_name() const { return entry_name_; }
  bool is_dynamic() const { return is_dynamic_; }
  const std::vector<ComputationView>& computations() const { return computations_; }
  const std::vector<FieldSpan>& fields() const { return fields_; }
  const std::vector<OutputAliasView>& aliases() const { return aliases_; }

  // By entry id, else by entry name, else the last (XLA writes the entry last); null when none.
  const ComputationView* entry() const;
  const ComputationView* Computation(int64_t id) const;
  int64_t LargestInstructionId() const;

 private:
  std::string bytes_;
  std::string name_;
  std::string entry_name_;
  bool has_entry_id_ = false;
  int64_t entry_id_ = 0;
  bool is_dynamic_ = false;
  std::vector<ComputationView> computations_;
  std::vector<FieldSpan> fields_;
  std::vector<OutputAliasView> aliases_;

  friend class ModuleReader;
};

// Writes a module from its view with some fields replaced; everything else is copied as read.
class ModuleEditor {
 public:
  explicit ModuleEditor(const ModuleView& view) : view_(view) {}
  // The instruction becomes these serialized HloInstructionProtos (none: it is removed).
  void Replace(const InstructionView& instruction, std::vector<std::string> instructions);
  // A field of the module or of a computation becomes `raw` (fields, tags included; empty: removed).
  void Replace(const FieldSpan& field, std::string raw);
  bool changed() const { return !edits_.empty(); }
  std::string Write() const;

 private:
  std::string WriteComputation(const ComputationView& computation) const;
  const ModuleView& view_;
  std::unordered_map<size_t, std::string> edits_;  // by the offset of the field replaced
};

}  // namespace pjrt_neuron::hlo
