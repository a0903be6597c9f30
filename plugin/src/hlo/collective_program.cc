// Reads a program's collectives and writes their channel ids (collective_program.h).
#include "hlo/collective_program.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hlo/module_view.h"
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

// The instruction, given a channel id, as one or more serialized instructions. XLA's layout
// assignment rejects a channel id on a tuple-shaped collective, so a tuple-shaped one becomes
// one collective per element and a tuple of their results under the original name and id. The
// layout constraint goes: it keeps the ranks' layouts equal, which the CPU engine's default
// layouts do anyway, and XLA rejects it on channel collectives too.
std::vector<std::string> WithChannel(const ModuleView& view, const InstructionView& instruction, int64_t* next_id,
                                     uint64_t* next_channel) {
  const std::vector<ShapeView>& element_shapes = instruction.shape.tuple_shapes;
  if (!instruction.shape.is_tuple() || element_shapes.empty() ||
      element_shapes.size() != instruction.operand_ids.size()) {
    std::string single =
        view.Concat(instruction.fields, {fields::kInstructionConstrainLayout, fields::kInstructionChannelId});
    AppendVarintField(&single, fields::kInstructionChannelId, (*next_channel)++);
    return {single};
  }
  std::vector<std::string> out;
  std::vector<int64_t> element_ids;
  const std::string per_element = view.Concat(
      instruction.fields, {fields::kInstructionConstrainLayout, fields::kInstructionChannelId, fields::kInstructionName,
                           fields::kInstructionShape, fields::kInstructionId, fields::kInstructionOperandIds});
  for (size_t k = 0; k < element_shapes.size(); ++k) {
    std::string element = per_element;
    AppendBytesField(&element, fields::kInstructionName, instruction.name + ".channel" + std::to_string(k));
    AppendBytesField(&element, fields::kInstructionShape, element_shapes[k].bytes);
    element_ids.push_back((*next_id)++);
    AppendVarintField(&element, fields::kInstructionId, static_cast<uint64_t>(element_ids.back()));
    AppendBytesField(&element, fields::kInstructionOperandIds, PackedVarints({instruction.operand_ids[k]}));
    AppendVarintField(&element, fields::kInstructionChannelId, (*next_channel)++);
    out.push_back(std::move(element));
  }
  std::string tuple;
  AppendBytesField(&tuple, fields::kInstructionName, instruction.name);
  AppendBytesField(&tuple, fields::kInstructionOpcode, "tuple");
  AppendBytesField(&tuple, fields::kInstructionShape, instruction.shape.bytes);
  AppendVarintField(&tuple, fields::kInstructionId, static_cast<uint64_t>(instruction.id));
  AppendBytesField(&tuple, fields::kInstructionOperandIds, PackedVarints(element_ids));
  out.push_back(std::move(tuple));
  return out;
}

}  // namespace

std::string WithCollectiveChannels(const std::string& module) {
  StatusOr<ModuleView> view = ModuleView::Read(module);
  return view.ok() ? WithCollectiveChannels(view.value()) : module;
}

std::string WithCollectiveChannels(const ModuleView& module) {
  ModuleEditor editor(module);
  uint64_t next_channel = kFirstAddedChannel;
  for (const ComputationView& computation : module.computations()) {
    int64_t next_id = 0;  // new instructions follow the computation's largest id
    for (const InstructionView& instruction : computation.instructions) next_id = std::max(next_id, instruction.id + 1);
    for (const InstructionView& instruction : computation.instructions) {
      if (!CanTakeChannel(instruction.opcode) || instruction.channel_id != 0) continue;
      editor.Replace(instruction, WithChannel(module, instruction, &next_id, &next_channel));
    }
  }
  return editor.changed() ? editor.Write() : module.bytes();
}

namespace {

bool HasOpcode(const ModuleView& module, bool (*wanted)(const std::string&)) {
  for (const ComputationView& computation : module.computations()) {
    for (const InstructionView& instruction : computation.instructions) {
      if (wanted(instruction.opcode)) return true;
    }
  }
  return false;
}

bool DependsOnItsCore(const std::string& opcode) {
  return MakesCoresMeet(opcode) || opcode == "replica-id" || opcode == "partition-id";
}

}  // namespace

// A format not read, or a malformed module, may have anything.
bool HasCollectives(const std::string& program, const std::string& format) {
  StatusOr<ModuleView> module = ModuleView::ReadHloProgram(program, format);
  return !module.ok() || HasCollectives(module.value());
}

bool HasCollectives(const ModuleView& module) { return HasOpcode(module, MakesCoresMeet); }

bool RunsAlikeOnEveryCore(const std::string& program, const std::string& format) {
  StatusOr<ModuleView> module = ModuleView::ReadHloProgram(program, format);
  return module.ok() && RunsAlikeOnEveryCore(module.value());
}

bool RunsAlikeOnEveryCore(const ModuleView& module) { return !HasOpcode(module, DependsOnItsCore); }

std::string CollectiveSignature(const std::string& program, const std::string& format, bool* matchable) {
  *matchable = false;
  StatusOr<ModuleView> module = ModuleView::ReadHloProgram(program, format);
  return module.ok() ? CollectiveSignature(module.value(), matchable) : std::string();
}

std::string CollectiveSignature(const ModuleView& module, bool* matchable) {
  *matchable = false;
  std::string signature;
  for (const ComputationView& computation : module.computations()) {
    for (const InstructionView& i : computation.instructions) {
      if (!IsCollective(i.opcode)) continue;
      if (i.channel_id == 0) return std::string();
      // Collectives that differ in shape or participants must not meet: XLA would wait for
      // them with its own, half-hour timeout instead of failing at ours.
      signature += i.opcode + "|" + std::to_string(i.shape.bytes.size()) + ":" + i.shape.bytes + "|" +
                   std::to_string(i.channel_id) + "|" + std::to_string(i.participants.size()) + ":" +
                   i.participants + ";";
    }
  }
  *matchable = !signature.empty();
  return signature;
}

}  // namespace pjrt_neuron::hlo
