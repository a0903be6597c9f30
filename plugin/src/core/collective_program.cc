#include "core/collective_program.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "core/wire_format.h"

namespace pjrt_neuron::core {
namespace {


// Field numbers in xla/service/hlo.proto.
constexpr uint32_t kWithConfigModule = 1;         // HloModuleProtoWithConfig
constexpr uint32_t kModuleComputations = 3;       // HloModuleProto
constexpr uint32_t kComputationInstructions = 2;  // HloComputationProto
constexpr uint32_t kInstructionName = 1;          // HloInstructionProto
constexpr uint32_t kInstructionOpcode = 2;
constexpr uint32_t kInstructionShape = 3;
constexpr uint32_t kInstructionChannelId = 26;
constexpr uint32_t kInstructionReplicaGroups = 49;
constexpr uint32_t kInstructionSourceTargetPairs = 52;
constexpr uint32_t kInstructionConstrainLayout = 56;
constexpr uint32_t kInstructionCollectiveDeviceList = 87;
constexpr uint32_t kInstructionId = 35;
constexpr uint32_t kInstructionOperandIds = 36;
constexpr uint32_t kShapeElementType = 2;  // ShapeProto
constexpr uint32_t kShapeTupleShapes = 4;
constexpr uint64_t kTupleType = 13;        // xla.PrimitiveType TUPLE

// Far above the channel ids frameworks assign, so added ones never collide with them.
constexpr uint64_t kFirstAddedChannel = uint64_t{1} << 40;

bool IsCollective(const std::string& opcode) {
  return opcode == "all-reduce" || opcode == "all-gather" || opcode == "reduce-scatter" || opcode == "all-to-all" ||
         opcode == "collective-permute" || opcode == "collective-broadcast" || opcode == "all-reduce-start" ||
         opcode == "all-gather-start" || opcode == "collective-permute-start";
}

bool CanTakeChannel(const std::string& opcode) {
  // These keep their replica groups' meaning with a channel id (cross-replica-and-partition,
  // one partition); all-to-all and collective-permute would become cross-partition.
  return opcode == "all-reduce" || opcode == "all-gather" || opcode == "reduce-scatter";
}

struct InstructionView {
  std::string opcode;
  std::string shape;
  uint64_t channel_id = 0;
  std::string groups;  // who takes part: replica groups, source-target pairs, as serialized
};

bool ReadInstruction(const std::string& bytes, InstructionView* view) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == kInstructionOpcode && f.wire_type == kLengthDelimited) view->opcode = f.payload;
    if (f.number == kInstructionShape && f.wire_type == kLengthDelimited) view->shape = f.payload;
    if (f.number == kInstructionChannelId && f.wire_type == kVarint) view->channel_id = f.varint;
    if (f.number == kInstructionReplicaGroups || f.number == kInstructionSourceTargetPairs ||
        f.number == kInstructionCollectiveDeviceList) {
      view->groups += f.raw;
    }
  }
  return true;
}

// Calls `visit` on every instruction in program order; false when the module is malformed.
bool ForEachInstruction(const std::string& module, const std::function<void(const std::string&)>& visit) {
  WireReader reader(module);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number != kModuleComputations || f.wire_type != kLengthDelimited) continue;
    WireReader computation(f.payload);
    Field g;
    while (!computation.done()) {
      if (!computation.Next(&g)) return false;
      if (g.number == kComputationInstructions && g.wire_type == kLengthDelimited) visit(g.payload);
    }
  }
  return true;
}

std::string WithoutFields(const std::string& message, std::initializer_list<uint32_t> numbers) {
  std::string out;
  WireReader reader(message);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return message;
    if (std::find(numbers.begin(), numbers.end(), f.number) == numbers.end()) out += f.raw;
  }
  return out;
}

// The parts of an instruction that splitting a tuple-shaped collective needs.
struct CollectiveParts {
  std::string name;
  int64_t id = 0;
  std::vector<int64_t> operand_ids;
  std::vector<std::string> element_shapes;  // empty: not a tuple
};

bool ReadParts(const std::string& instruction, const std::string& shape, CollectiveParts* parts) {
  WireReader reader(instruction);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == kInstructionName && f.wire_type == kLengthDelimited) parts->name = f.payload;
    if (f.number == kInstructionId && f.wire_type == kVarint) parts->id = static_cast<int64_t>(f.varint);
    if (f.number == kInstructionOperandIds && f.wire_type == kVarint) parts->operand_ids.push_back(f.varint);
    if (f.number == kInstructionOperandIds && f.wire_type == kLengthDelimited) {  // packed
      WireReader packed(f.payload);
      uint64_t id;
      while (!packed.done()) {
        if (!packed.Varint(&id)) return false;
        parts->operand_ids.push_back(static_cast<int64_t>(id));
      }
    }
  }
  WireReader shape_reader(shape);
  bool is_tuple = false;
  std::vector<std::string> elements;
  while (!shape_reader.done()) {
    if (!shape_reader.Next(&f)) return false;
    if (f.number == kShapeElementType && f.wire_type == kVarint) is_tuple = f.varint == kTupleType;
    if (f.number == kShapeTupleShapes && f.wire_type == kLengthDelimited) elements.push_back(f.payload);
  }
  if (is_tuple) parts->element_shapes = std::move(elements);
  return true;
}

std::string PackedIds(const std::vector<int64_t>& ids) {
  std::string packed;
  for (int64_t id : ids) AppendVarint(&packed, static_cast<uint64_t>(id));
  return packed;
}

// The instruction, given a channel id, as one or more serialized instructions. XLA's layout
// assignment rejects a channel id on a tuple-shaped collective, so a tuple-shaped one becomes
// one collective per element and a tuple of their results under the original name and id. The
// layout constraint goes: it keeps the ranks' layouts equal, which the CPU engine's default
// layouts do anyway, and XLA rejects it on channel collectives too.
std::vector<std::string> WithChannel(const std::string& instruction, const std::string& shape, int64_t* next_id,
                                     uint64_t* next_channel) {
  CollectiveParts parts;
  const std::string common = WithoutFields(instruction, {kInstructionConstrainLayout, kInstructionChannelId});
  if (!ReadParts(instruction, shape, &parts) || parts.element_shapes.empty() ||
      parts.element_shapes.size() != parts.operand_ids.size()) {
    std::string single = common;
    AppendVarintField(&single, kInstructionChannelId, (*next_channel)++);
    return {single};
  }
  std::vector<std::string> out;
  std::vector<int64_t> element_ids;
  const std::string per_element = WithoutFields(
      common, {kInstructionName, kInstructionShape, kInstructionId, kInstructionOperandIds});
  for (size_t k = 0; k < parts.element_shapes.size(); ++k) {
    std::string element = per_element;
    AppendBytesField(&element, kInstructionName, parts.name + ".channel" + std::to_string(k));
    AppendBytesField(&element, kInstructionShape, parts.element_shapes[k]);
    element_ids.push_back((*next_id)++);
    AppendVarintField(&element, kInstructionId, static_cast<uint64_t>(element_ids.back()));
    AppendBytesField(&element, kInstructionOperandIds, PackedIds({parts.operand_ids[k]}));
    AppendVarintField(&element, kInstructionChannelId, (*next_channel)++);
    out.push_back(std::move(element));
  }
  std::string tuple;
  AppendBytesField(&tuple, kInstructionName, parts.name);
  AppendBytesField(&tuple, kInstructionOpcode, "tuple");
  AppendBytesField(&tuple, kInstructionShape, shape);
  AppendVarintField(&tuple, kInstructionId, static_cast<uint64_t>(parts.id));
  AppendBytesField(&tuple, kInstructionOperandIds, PackedIds(element_ids));
  out.push_back(std::move(tuple));
  return out;
}

// The largest instruction id of a computation, so new instructions can follow it.
int64_t MaxInstructionId(const std::string& computation) {
  int64_t max_id = 0;
  WireReader reader(computation);
  Field g;
  while (!reader.done() && reader.Next(&g)) {
    if (g.number != kComputationInstructions || g.wire_type != kLengthDelimited) continue;
    CollectiveParts parts;
    if (ReadParts(g.payload, "", &parts)) max_id = std::max(max_id, parts.id);
  }
  return max_id;
}

}  // namespace

std::string WithCollectiveChannels(const std::string& module) {
  uint64_t next_channel = kFirstAddedChannel;
  bool changed = false;
  std::string out;
  WireReader reader(module);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return module;
    if (f.number != kModuleComputations || f.wire_type != kLengthDelimited) {
      out += f.raw;
      continue;
    }
    std::string computation_out;
    int64_t next_id = MaxInstructionId(f.payload) + 1;
    WireReader computation(f.payload);
    Field g;
    while (!computation.done()) {
      if (!computation.Next(&g)) return module;
      InstructionView view;
      if (g.number != kComputationInstructions || g.wire_type != kLengthDelimited ||
          !ReadInstruction(g.payload, &view) || !CanTakeChannel(view.opcode) || view.channel_id != 0) {
        computation_out += g.raw;
        continue;
      }
      for (const std::string& instruction : WithChannel(g.payload, view.shape, &next_id, &next_channel)) {
        AppendBytesField(&computation_out, kComputationInstructions, instruction);
      }
      changed = true;
    }
    AppendBytesField(&out, kModuleComputations, computation_out);
  }
  return changed ? out : module;
}

std::string CollectiveSignature(const std::string& program, const std::string& format, bool* matchable) {
  *matchable = false;
  std::string module;
  if (format == "hlo") {
    module = program;
  } else if (format == "hlo_with_config") {
    WireReader reader(program);
    Field f;
    while (!reader.done() && reader.Next(&f)) {
      if (f.number == kWithConfigModule && f.wire_type == kLengthDelimited) module = f.payload;
    }
  }
  if (module.empty()) return std::string();
  std::string signature;
  bool every_channeled = true;
  bool well_formed = ForEachInstruction(module, [&](const std::string& bytes) {
    InstructionView view;
    if (!ReadInstruction(bytes, &view)) {
      every_channeled = false;
      return;
    }
    if (!IsCollective(view.opcode)) return;
    if (view.channel_id == 0) every_channeled = false;
    // Collectives that differ in shape or participants must not meet: XLA would wait for them
    // with its own, half-hour timeout instead of failing at ours.
    signature += view.opcode + "|" + std::to_string(view.shape.size()) + ":" + view.shape + "|" +
                 std::to_string(view.channel_id) + "|" + std::to_string(view.groups.size()) + ":" + view.groups + ";";
  });
  *matchable = well_formed && every_channeled && !signature.empty();
  return *matchable ? signature : std::string();
}

}  // namespace pjrt_neuron::core
