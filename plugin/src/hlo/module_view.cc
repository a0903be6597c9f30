// Decodes an HloModuleProto into its view, and writes edited modules back (module_view.h).
#include "hlo/module_view.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {

namespace fields = hlo_fields;

namespace {

constexpr int kS64 = 5;
constexpr int kMaxShapeDepth = 64;

// A message's fields in order, each with its offset in the module; false when malformed.
class Reader {
 public:
  Reader(const std::string& bytes, size_t offset) : reader_(bytes), offset_(offset) {}
  bool done() const { return reader_.done(); }
  bool Next(Field* f, FieldSpan* span = nullptr) {
    if (!reader_.Next(f)) return false;
    // Only a length-delimited field has a payload; WireReader leaves the last one in place.
    const bool has_payload = f->wire_type == kLengthDelimited;
    payload_offset_ = has_payload ? offset_ + f->raw.size() - f->payload.size() : 0;
    if (span != nullptr) {
      *span = {f->number, f->wire_type, {offset_, f->raw.size()}, {0, 0}};
      if (has_payload) span->payload = {payload_offset_, f->payload.size()};
    }
    offset_ += f->raw.size();
    return true;
  }
  size_t payload_offset() const { return payload_offset_; }  // of the last field read

 private:
  WireReader reader_;
  size_t offset_;
  size_t payload_offset_ = 0;
};

// A repeated int64 field, packed or one a field.
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

bool IsBytes(const Field& f) { return f.wire_type == kLengthDelimited; }
bool IsVarint(const Field& f) { return f.wire_type == kVarint; }

// Calls `visit` on each field of `bytes`; false when malformed or `visit` returns false.
template <typename Visit>
bool ForEachField(const std::string& bytes, Visit visit) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f) || !visit(f)) return false;
  }
  return true;
}

bool ReadShape(const std::string& bytes, ShapeView* shape, int depth) {
  if (depth > kMaxShapeDepth) return false;
  *shape = ShapeView();
  shape->bytes = bytes;
  return ForEachField(bytes, [&](const Field& f) {
    if (f.number == fields::kShapeElementType && IsVarint(f)) shape->element_type = static_cast<int>(f.varint);
    if (f.number == fields::kShapeDimensions) return AppendInts(f, &shape->dims);
    if (f.number == fields::kShapeTupleShapes && IsBytes(f)) {
      shape->tuple_shapes.emplace_back();
      if (!ReadShape(f.payload, &shape->tuple_shapes.back(), depth + 1)) return false;
      shape->dynamic |= shape->tuple_shapes.back().dynamic;
    }
    if (f.number == fields::kShapeIsDynamicDimension) {
      if (IsVarint(f)) shape->dynamic |= f.varint != 0;
      if (IsBytes(f)) {
        for (char c : f.payload) shape->dynamic |= c != 0;
      }
    }
    return true;
  });
}

// Participants per group, from one replica_groups entry or the collective_device_list; 0 when
// every device.
bool ReadGroupSize(const Field& f, int* size) {
  std::vector<int64_t> ids;
  if (f.number == fields::kInstructionReplicaGroups) {
    bool ok = ForEachField(f.payload, [&](const Field& g) {
      return g.number != fields::kReplicaGroupIds || AppendInts(g, &ids);
    });
    *size = static_cast<int>(ids.size());
    return ok;
  }
  bool found = false;
  return ForEachField(f.payload, [&](const Field& g) {
    if (found || !IsBytes(g)) return true;
    if (g.number == fields::kDeviceListGroups) {
      found = true;
      Field group = g;
      group.number = fields::kInstructionReplicaGroups;
      return ReadGroupSize(group, size);
    }
    if (g.number == fields::kDeviceListIota) {
      return ForEachField(g.payload, [&](const Field& h) {
        if (!found && h.number == fields::kIotaDevicesPerGroup && IsVarint(h)) {
          found = true;
          *size = static_cast<int>(h.varint);
        }
        return true;
      });
    }
    return true;
  });
}

bool ReadFrontendAttributes(const std::string& bytes, std::vector<FrontendAttribute>* out) {
  return ForEachField(bytes, [&](const Field& entry) {
    FrontendAttribute attribute;
    attribute.raw = entry.raw;
    if (entry.number == 1 && IsBytes(entry)) {
      if (!ForEachField(entry.payload, [&](const Field& g) {
            if (g.number == fields::kMapKey) attribute.key = g.payload;
            if (g.number == fields::kMapValue) attribute.value = g.payload;
            return true;
          })) {
        return false;
      }
    }
    out->push_back(std::move(attribute));
    return true;
  });
}

bool LiteralBeyondInt32(const std::string& literal, bool* beyond) {
  std::vector<int64_t> values;
  auto read = [&](const Field& f) { return f.number != fields::kLiteralS64s || AppendInts(f, &values); };
  if (!ForEachField(literal, read)) {
    return false;
  }
  *beyond = std::any_of(values.begin(), values.end(), [](int64_t v) { return v < INT32_MIN || v > INT32_MAX; });
  return true;
}

}  // namespace

// The module's fields, read into a view; friend of ModuleView.
class ModuleReader {
 public:
  explicit ModuleReader(ModuleView* view) : view_(*view) {}

  Status Read() {
    Reader reader(view_.bytes_, 0);
    Field f;
    FieldSpan span;
    std::vector<int64_t> frames;
    while (!reader.done()) {
      if (!reader.Next(&f, &span)) return Malformed("the module is not valid protobuf");
      view_.fields_.push_back(span);
      if (f.number == fields::kModuleComputations && IsBytes(f)) {
        view_.computations_.emplace_back();
        ComputationView& computation = view_.computations_.back();
        computation.field = span.raw;
        PN_RETURN_IF_ERROR(ReadComputation(f.payload, reader.payload_offset(), &computation));
      } else if (f.number == fields::kModuleName && IsBytes(f)) {
        view_.name_ = f.payload;
      } else if (f.number == fields::kModuleEntryName && IsBytes(f)) {
        view_.entry_name_ = f.payload;
      } else if (f.number == fields::kModuleEntryComputationId && IsVarint(f)) {
        view_.has_entry_id_ = true;
        view_.entry_id_ = static_cast<int64_t>(f.varint);
      } else if (f.number == fields::kModuleIsDynamic && IsVarint(f)) {
        view_.is_dynamic_ = f.varint != 0;
      } else if (f.number == fields::kModuleAliases && IsBytes(f)) {
        if (!ReadAliases(f.payload)) return Malformed("input_output_alias is not valid protobuf");
      } else if (f.number == fields::kModuleStackFrameIndex && IsBytes(f)) {
        if (!ReadFrameIndex(f.payload)) return Malformed("the stack frame index is not valid protobuf");
      }
    }
    for (ComputationView& computation : view_.computations_) {
      for (InstructionView& instruction : computation.instructions) ResolveFrame(&instruction);
    }
    return Status::Ok();
  }

 private:
  static Status Malformed(const std::string& what) { return InvalidArgument(what); }

  Status ReadComputation(const std::string& bytes, size_t offset, ComputationView* computation) {
    Reader reader(bytes, offset);
    Field f;
    FieldSpan span;
    while (!reader.done()) {
      if (!reader.Next(&f, &span)) return Malformed("a computation is not valid");
      computation->fields.push_back(span);
      if (f.number == fields::kComputationInstructions && IsBytes(f)) {
        computation->instructions.emplace_back();
        InstructionView& instruction = computation->instructions.back();
        instruction.field = span.raw;
        instruction.bytes = {reader.payload_offset(), f.payload.size()};
        if (!ReadInstruction(f.payload, reader.payload_offset(), &instruction)) {
          return Malformed("a computation is not valid");
        }
      } else if (f.number == fields::kComputationName && IsBytes(f)) {
        computation->name = f.payload;
      } else if (f.number == fields::kComputationId && IsVarint(f)) {
        computation->id = static_cast<int64_t>(f.varint);
      } else if (f.number == fields::kComputationRootId && IsVarint(f)) {
        computation->has_root_id = true;
        computation->root_id = static_cast<int64_t>(f.varint);
      }
    }
    for (size_t i = 0; i < computation->instructions.size(); ++i) {
      InstructionView& instruction = computation->instructions[i];
      computation->by_id_.emplace(instruction.id, i);
      for (int64_t operand : instruction.operand_ids) {
        auto found = computation->by_id_.find(operand);
        if (found == computation->by_id_.end()) continue;
        std::vector<size_t>& users = computation->instructions[found->second].users;
        if (users.empty() || users.back() != i) users.push_back(i);
      }
    }
    return Status::Ok();
  }

  bool ReadInstruction(const std::string& bytes, size_t offset, InstructionView* i) {
    Reader reader(bytes, offset);
    Field f;
    FieldSpan span;
    std::string literal;
    while (!reader.done()) {
      if (!reader.Next(&f, &span)) return false;
      i->fields.push_back(span);
      if (!ReadInstructionField(f, i)) return false;
      if (f.number == fields::kInstructionLiteral && IsBytes(f)) literal = f.payload;
    }
    // Only s64 constants can hold such values; other literals (weights) are not scanned.
    bool s64 = false;
    for (const ShapeView* leaf : i->shape.Leaves()) s64 |= leaf->element_type == kS64;
    return !s64 || LiteralBeyondInt32(literal, &i->literal_beyond_int32);
  }

  bool ReadInstructionField(const Field& f, InstructionView* i) {
    switch (f.number) {
      case fields::kInstructionName: if (IsBytes(f)) i->name = f.payload; break;
      case fields::kInstructionOpcode: if (IsBytes(f)) i->opcode = f.payload; break;
      case fields::kInstructionShape: return !IsBytes(f) || ReadShape(f.payload, &i->shape, 0);
      case fields::kInstructionMetadata: return !IsBytes(f) || ReadMetadata(f.payload, i);
      case fields::kInstructionId: if (IsVarint(f)) i->id = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionParameterNumber:
        if (IsVarint(f)) i->parameter_number = static_cast<int64_t>(f.varint);
        break;
      case fields::kInstructionChannelId: if (IsVarint(f)) i->channel_id = f.varint; break;
      case fields::kInstructionCustomCallTarget: if (IsBytes(f)) i->custom_call_target = f.payload; break;
      case fields::kInstructionCustomCallApiVersion: if (IsVarint(f)) i->custom_call_api_version = f.varint; break;
      case fields::kInstructionBackendConfig: if (IsBytes(f)) i->backend_config = f.payload; break;
      case fields::kInstructionComparisonDirection: if (IsBytes(f)) i->comparison_direction = f.payload; break;
      case fields::kInstructionOperandIds: return AppendInts(f, &i->operand_ids);
      case fields::kInstructionCalledComputations: return AppendInts(f, &i->called_computation_ids);
      case fields::kInstructionDimensions: return AppendInts(f, &i->dimensions);
      case fields::kInstructionFrontendAttributes:
        return !IsBytes(f) || ReadFrontendAttributes(f.payload, &i->frontend_attributes);
      case fields::kInstructionDotDimensionNumbers:
        return !IsBytes(f) || ForEachField(f.payload, [&](const Field& g) {
          if (g.number == fields::kDotLhsContracting) return AppendInts(g, &i->dot_lhs_contracting);
          if (g.number == fields::kDotLhsBatch) return AppendInts(g, &i->dot_lhs_batch);
          return true;
        });
      case fields::kInstructionConvolutionDimensionNumbers:
        return !IsBytes(f) || ForEachField(f.payload, [&](const Field& g) {
          if (g.number == fields::kConvKernelOutputFeature && IsVarint(g)) {
            i->convolution_kernel_output_feature = static_cast<int64_t>(g.varint);
          }
          return true;
        });
      case fields::kInstructionReplicaGroups:
      case fields::kInstructionCollectiveDeviceList: {
        i->participants += f.raw;
        int size = 0;
        if (!IsBytes(f) || !ReadGroupSize(f, &size)) return false;
        if (size > 0 && i->group_size == 0) i->group_size = size;
        break;
      }
      case fields::kInstructionSourceTargetPairs: i->participants += f.raw; break;
      default: break;
    }
    return true;
  }

  bool ReadMetadata(const std::string& bytes, InstructionView* i) {
    return ForEachField(bytes, [&](const Field& f) {
      if (f.number == fields::kMetadataOpName && IsBytes(f)) i->op_name = f.payload;
      if (f.number == fields::kMetadataSourceFile && IsBytes(f)) i->source_file = f.payload;
      if (f.number == fields::kMetadataSourceLine && IsVarint(f)) i->source_line = static_cast<int>(f.varint);
      if (f.number == fields::kMetadataStackFrameId && IsVarint(f)) i->stack_frame_id = static_cast<int64_t>(f.varint);
      return true;
    });
  }

  bool ReadAliases(const std::string& bytes) {
    return ForEachField(bytes, [&](const Field& f) {
      if (f.number != fields::kAliasEntries || !IsBytes(f)) return true;
      OutputAliasView alias;
      view_.aliases_.push_back(alias);
      OutputAliasView& at = view_.aliases_.back();
      return ForEachField(f.payload, [&](const Field& g) {
        if (g.number == fields::kAliasOutputIndex) return AppendInts(g, &at.output_index);
        if (g.number == fields::kAliasParameterIndex) return AppendInts(g, &at.parameter_index);
        if (g.number == fields::kAliasParameterNumber && IsVarint(g)) {
          at.parameter_number = static_cast<int64_t>(g.varint);
        }
        if (g.number == fields::kAliasKind && IsVarint(g)) at.kind = g.varint;
        return true;
      });
    });
  }

  // HloModuleProto.stack_frame_index: file names, file locations (file name id, line) and
  // frames (file location id), each 1-based.
  bool ReadFrameIndex(const std::string& bytes) {
    return ForEachField(bytes, [&](const Field& f) {
      if (!IsBytes(f)) return true;
      if (f.number == fields::kFrameIndexFileNames) file_names_.push_back(f.payload);
      if (f.number != fields::kFrameIndexFileLocations && f.number != fields::kFrameIndexStackFrames) return true;
      const bool location = f.number == fields::kFrameIndexFileLocations;
      const uint32_t id_field = location ? fields::kFileLocationFileNameId : fields::kStackFrameFileLocationId;
      int64_t id = 0;
      int line = 0;
      if (!ForEachField(f.payload, [&](const Field& g) {
            if (g.number == id_field && IsVarint(g)) id = static_cast<int64_t>(g.varint);
            if (location && g.number == fields::kFileLocationLine && IsVarint(g)) line = static_cast<int>(g.varint);
            return true;
          })) {
        return false;
      }
      if (location) {
        file_locations_.emplace_back(id, line);
      } else {
        frame_locations_.push_back(id);
      }
      return true;
    });
  }

  // The innermost frame of an instruction's stack: the user's line, as source_file/line were.
  void ResolveFrame(InstructionView* i) const {
    if (!i->source_file.empty() || i->stack_frame_id <= 0) return;
    const size_t frame = static_cast<size_t>(i->stack_frame_id - 1);
    if (frame >= frame_locations_.size()) return;
    const int64_t location = frame_locations_[frame];
    if (location <= 0 || static_cast<size_t>(location) > file_locations_.size()) return;
    const auto& [file, line] = file_locations_[static_cast<size_t>(location - 1)];
    if (file <= 0 || static_cast<size_t>(file) > file_names_.size()) return;
    i->source_file = file_names_[static_cast<size_t>(file - 1)];
    i->source_line = line;
  }

  ModuleView& view_;
  std::vector<std::string> file_names_;
  std::vector<std::pair<int64_t, int>> file_locations_;
  std::vector<int64_t> frame_locations_;
};

std::vector<const ShapeView*> ShapeView::Leaves() const {
  if (!is_tuple()) return {this};
  std::vector<const ShapeView*> leaves;
  for (const ShapeView& element : tuple_shapes) {
    for (const ShapeView* leaf : element.Leaves()) leaves.push_back(leaf);
  }
  return leaves;
}

const FrontendAttribute* InstructionView::Attribute(const std::string& key) const {
  for (const FrontendAttribute& attribute : frontend_attributes) {
    if (attribute.key == key) return &attribute;
  }
  return nullptr;
}

const InstructionView* ComputationView::Find(int64_t instruction_id) const {
  auto found = by_id_.find(instruction_id);
  return found == by_id_.end() ? nullptr : &instructions[found->second];
}

const InstructionView* ComputationView::Root() const {
  if (instructions.empty()) return nullptr;
  return has_root_id ? Find(root_id) : &instructions.back();
}

StatusOr<ModuleView> ModuleView::Read(std::string module) {
  ModuleView view;
  view.bytes_ = std::move(module);
  ModuleReader reader(&view);
  PN_RETURN_IF_ERROR(reader.Read());
  return view;
}

StatusOr<ModuleView> ModuleView::ReadProgram(const std::string& program, bool with_config) {
  return Read(HloModuleBytes(program, with_config));
}

StatusOr<ModuleView> ModuleView::ReadHloProgram(const std::string& program, const std::string& format) {
  if (format != "hlo" && format != "hlo_with_config") return InvalidArgument("'" + format + "' is not an HLO format");
  std::string module = HloModuleBytes(program, format == "hlo_with_config");
  if (module.empty()) return InvalidArgument("the program has no module");
  return Read(std::move(module));
}

std::string ModuleView::Concat(const std::vector<FieldSpan>& fields, std::initializer_list<uint32_t> drop) const {
  std::string out;
  for (const FieldSpan& f : fields) {
    if (std::find(drop.begin(), drop.end(), f.number) == drop.end()) out += Bytes(f.raw);
  }
  return out;
}

const ComputationView* ModuleView::entry() const {
  if (computations_.empty()) return nullptr;
  const ComputationView* entry = &computations_.back();
  for (const ComputationView& c : computations_) {
    if (has_entry_id_ ? c.id == entry_id_ : (!entry_name_.empty() && c.name == entry_name_)) entry = &c;
  }
  return entry;
}

const ComputationView* ModuleView::Computation(int64_t id) const {
  for (const ComputationView& c : computations_) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

int64_t ModuleView::LargestInstructionId() const {
  int64_t largest = 0;
  for (const ComputationView& c : computations_) {
    for (const InstructionView& i : c.instructions) largest = std::max(largest, i.id);
  }
  return largest;
}

void ModuleEditor::Replace(const InstructionView& instruction, std::vector<std::string> instructions) {
  std::string raw;
  for (const std::string& bytes : instructions) AppendBytesField(&raw, hlo_fields::kComputationInstructions, bytes);
  edits_[instruction.field.offset] = std::move(raw);
}

void ModuleEditor::Replace(const FieldSpan& field, std::string raw) { edits_[field.raw.offset] = std::move(raw); }

std::string ModuleEditor::WriteComputation(const ComputationView& computation) const {
  std::string out;
  for (const FieldSpan& f : computation.fields) {
    auto edit = edits_.find(f.raw.offset);
    out += edit != edits_.end() ? std::string_view(edit->second) : view_.Bytes(f.raw);
  }
  return out;
}

std::string ModuleEditor::Write() const {
  std::string out;
  size_t next_computation = 0;
  for (const FieldSpan& f : view_.fields()) {
    const bool is_computation = f.number == hlo_fields::kModuleComputations && f.wire_type == kLengthDelimited;
    const ComputationView* computation = is_computation ? &view_.computations()[next_computation++] : nullptr;
    auto edit = edits_.find(f.raw.offset);
    if (edit != edits_.end()) {
      out += edit->second;
      continue;
    }
    const bool edited_inside = computation != nullptr && std::any_of(edits_.begin(), edits_.end(), [&](const auto& e) {
      return e.first > f.raw.offset && e.first < f.raw.offset + f.raw.size;
    });
    if (edited_inside) {
      AppendBytesField(&out, hlo_fields::kModuleComputations, WriteComputation(*computation));
    } else {
      out += view_.Bytes(f.raw);
    }
  }
  return out;
}

}  // namespace pjrt_neuron::hlo
