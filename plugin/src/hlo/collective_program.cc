// Reads a program's collectives and writes their channel ids (collective_program.h).
#include "hlo/collective_program.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

// Far above the channel ids frameworks assign, so added ones never collide with them.
constexpr uint64_t kFirstAddedChannel = uint64_t{1} << 40;

bool IsCollective(const std::string& opcode) {
  return opcode == "all-reduce" || opcode == "all-gather" || opcode == "reduce-scatter" || opcode == "all-to-all" ||
         opcode == "collective-permute" || opcode == "collective-broadcast" || opcode == "all-reduce-start" ||
         opcode == "all-gather-start" || opcode == "collective-permute-start";
}

// Every opcode of an instruction that makes cores meet, the async halves included.
bool MakesCoresMeet(const std::string& opcode) {
  for (const char* op : {"all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
                         "all-gather-done", "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute",
                         "collective-permute-start", "collective-permute-done", "collective-broadcast"}) {
    if (opcode == op) return true;
  }
  return false;
}

bool CanTakeChannel(const std::string& opcode) {
  // These keep their replica groups' meaning with a channel id (cross-replica-and-partition,
  // one partition); all-to-all and collective-permute would become cross-partition.
  return opcode == "all-reduce" || opcode == "all-gather" || opcode == "reduce-scatter";
}

struct Instruction {
  std::string name;
  std::string opcode;
  std::string shape;
  int64_t id = 0;
  uint64_t channel_id = 0;
  std::vector<int64_t> operand_ids;
  std::string groups;  // who takes part: replica groups, source-target pairs, as serialized
};

bool ReadInstruction(const std::string& bytes, Instruction* instruction) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    switch (f.number) {
      case fields::kInstructionName: instruction->name = f.payload; break;
      case fields::kInstructionOpcode: instruction->opcode = f.payload; break;
      case fields::kInstructionShape: instruction->shape = f.payload; break;
      case fields::kInstructionId: instruction->id = static_cast<int64_t>(f.varint); break;
      case fields::kInstructionChannelId: instruction->channel_id = f.varint; break;
      case fields::kInstructionReplicaGroups:
      case fields::kInstructionSourceTargetPairs:
      case fields::kInstructionCollectiveDeviceList: instruction->groups += f.raw; break;
      case fields::kInstructionOperandIds:
        if (f.wire_type == kVarint) {
          instruction->operand_ids.push_back(static_cast<int64_t>(f.varint));
        } else {  // packed
          WireReader packed(f.payload);
          uint64_t id;
          while (!packed.done()) {
            if (!packed.Varint(&id)) return false;
            instruction->operand_ids.push_back(static_cast<int64_t>(id));
          }
        }
        break;
      default: break;
    }
  }
  return true;
}

// The element shapes of a tuple shape; empty for an array shape.
std::vector<std::string> TupleElementShapes(const std::string& shape) {
  std::vector<std::string> elements;
  bool is_tuple = false;
  WireReader reader(shape);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kShapeElementType && f.wire_type == kVarint) is_tuple = f.varint == kTupleElementType;
    if (f.number == fields::kShapeTupleShapes && f.wire_type == kLengthDelimited) elements.push_back(f.payload);
  }
  return is_tuple ? elements : std::vector<std::string>();
}

// Calls `visit` on each computation's bytes in order; false when the module is malformed or
// `visit` returns false.
bool ForEachComputation(const std::string& module, const std::function<bool(const std::string&)>& visit) {
  WireReader reader(module);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == fields::kModuleComputations && f.wire_type == kLengthDelimited && !visit(f.payload)) return false;
  }
  return true;
}

// Calls `visit` on each instruction field of a computation in order; false when malformed.
bool ForEachInstruction(const std::string& computation, const std::function<void(const Field&)>& visit) {
  WireReader reader(computation);
  Field g;
  while (!reader.done()) {
    if (!reader.Next(&g)) return false;
    if (g.number == fields::kComputationInstructions && g.wire_type == kLengthDelimited) visit(g);
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
std::vector<std::string> WithChannel(const std::string& bytes, const Instruction& instruction, int64_t* next_id,
                                     uint64_t* next_channel) {
  const std::string common =
      WithoutFields(bytes, {fields::kInstructionConstrainLayout, fields::kInstructionChannelId});
  const std::vector<std::string> element_shapes = TupleElementShapes(instruction.shape);
  if (element_shapes.empty() || element_shapes.size() != instruction.operand_ids.size()) {
    std::string single = common;
    AppendVarintField(&single, fields::kInstructionChannelId, (*next_channel)++);
    return {single};
  }
  std::vector<std::string> out;
  std::vector<int64_t> element_ids;
  const std::string per_element = WithoutFields(common, {fields::kInstructionName, fields::kInstructionShape,
                                                         fields::kInstructionId, fields::kInstructionOperandIds});
  for (size_t k = 0; k < element_shapes.size(); ++k) {
    std::string element = per_element;
    AppendBytesField(&element, fields::kInstructionName, instruction.name + ".channel" + std::to_string(k));
    AppendBytesField(&element, fields::kInstructionShape, element_shapes[k]);
    element_ids.push_back((*next_id)++);
    AppendVarintField(&element, fields::kInstructionId, static_cast<uint64_t>(element_ids.back()));
    AppendBytesField(&element, fields::kInstructionOperandIds, PackedIds({instruction.operand_ids[k]}));
    AppendVarintField(&element, fields::kInstructionChannelId, (*next_channel)++);
    out.push_back(std::move(element));
  }
  std::string tuple;
  AppendBytesField(&tuple, fields::kInstructionName, instruction.name);
  AppendBytesField(&tuple, fields::kInstructionOpcode, "tuple");
  AppendBytesField(&tuple, fields::kInstructionShape, instruction.shape);
  AppendVarintField(&tuple, fields::kInstructionId, static_cast<uint64_t>(instruction.id));
  AppendBytesField(&tuple, fields::kInstructionOperandIds, PackedIds(element_ids));
  out.push_back(std::move(tuple));
  return out;
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
    if (f.number != fields::kModuleComputations || f.wire_type != kLengthDelimited) {
      out += f.raw;
      continue;
    }
    int64_t next_id = 0;  // new instructions follow the computation's largest id
    ForEachInstruction(f.payload, [&](const Field& g) {
      Instruction instruction;
      if (ReadInstruction(g.payload, &instruction)) next_id = std::max(next_id, instruction.id + 1);
    });
    std::string computation_out;
    WireReader computation(f.payload);
    Field g;
    while (!computation.done()) {
      if (!computation.Next(&g)) return module;
      Instruction instruction;
      if (g.number != fields::kComputationInstructions || g.wire_type != kLengthDelimited ||
          !ReadInstruction(g.payload, &instruction) || !CanTakeChannel(instruction.opcode) ||
          instruction.channel_id != 0) {
        computation_out += g.raw;
        continue;
      }
      for (const std::string& bytes : WithChannel(g.payload, instruction, &next_id, &next_channel)) {
        AppendBytesField(&computation_out, fields::kComputationInstructions, bytes);
      }
      changed = true;
    }
    AppendBytesField(&out, fields::kModuleComputations, computation_out);
  }
  return changed ? out : module;
}

namespace {

// Whether some instruction's opcode satisfies `wanted`; true for a format not read or a malformed module.
bool HasOpcode(const std::string& program, const std::string& format, bool (*wanted)(const std::string&)) {
  if (format != "hlo" && format != "hlo_with_config") return true;
  const std::string module = HloModuleBytes(program, format == "hlo_with_config");
  if (module.empty()) return true;
  bool found = false;
  bool well_formed = ForEachComputation(module, [&](const std::string& computation) {
    bool instructions_read = true;
    bool computation_read = ForEachInstruction(computation, [&](const Field& g) {
      Instruction instruction;
      if (!ReadInstruction(g.payload, &instruction)) instructions_read = false;
      found = found || wanted(instruction.opcode);
    });
    return computation_read && instructions_read;
  });
  return found || !well_formed;
}

bool DependsOnItsCore(const std::string& opcode) {
  return MakesCoresMeet(opcode) || opcode == "replica-id" || opcode == "partition-id";
}

}  // namespace

bool HasCollectives(const std::string& program, const std::string& format) {
  return HasOpcode(program, format, [](const std::string& opcode) { return MakesCoresMeet(opcode); });
}

bool RunsAlikeOnEveryCore(const std::string& program, const std::string& format) {
  return !HasOpcode(program, format, DependsOnItsCore);
}

std::string CollectiveSignature(const std::string& program, const std::string& format, bool* matchable) {
  *matchable = false;
  if (format != "hlo" && format != "hlo_with_config") return std::string();
  const std::string module = HloModuleBytes(program, format == "hlo_with_config");
  std::string signature;
  bool every_channeled = true;
  bool well_formed = ForEachComputation(module, [&](const std::string& computation) {
    return ForEachInstruction(computation, [&](const Field& g) {
      Instruction instruction;
      if (!ReadInstruction(g.payload, &instruction)) every_channeled = false;
      if (!IsCollective(instruction.opcode)) return;
      if (instruction.channel_id == 0) every_channeled = false;
      // Collectives that differ in shape or participants must not meet: XLA would wait for
      // them with its own, half-hour timeout instead of failing at ours.
      signature += instruction.opcode + "|" + std::to_string(instruction.shape.size()) + ":" + instruction.shape +
                   "|" + std::to_string(instruction.channel_id) + "|" + std::to_string(instruction.groups.size()) +
                   ":" + instruction.groups + ";";
    });
  });
  *matchable = well_formed && every_channeled && !signature.empty();
  return *matchable ? signature : std::string();
}

}  // namespace pjrt_neuron::hlo
