// Restates a partitioned program's partitions as replicas (partitions_as_replicas.h).
#include "hlo/partitions_as_replicas.h"

#include <initializer_list>

#include "hlo/module_view.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = hlo_fields;

// Opcodes that name the cores they meet; their "-done" halves name none.
bool NamesCores(const std::string& opcode) {
  for (const char* op : {"all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter",
                         "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
                         "collective-broadcast"}) {
    if (opcode == op) return true;
  }
  return false;
}

// The instruction with `drop` fields removed and, when `opcode` is set, that opcode.
std::string Rewritten(const ModuleView& view, const InstructionView& instruction, std::initializer_list<uint32_t> drop,
                      const char* opcode) {
  std::string out;
  for (const FieldSpan& f : instruction.fields) {
    bool dropped = false;
    for (uint32_t number : drop) dropped = dropped || f.number == number;
    if (opcode != nullptr && f.number == fields::kInstructionOpcode) {
      AppendBytesField(&out, fields::kInstructionOpcode, opcode);
    } else if (!dropped) {
      out += view.Bytes(f.raw);
    }
  }
  return out;
}

}  // namespace

StatusOr<std::string> PartitionsAsReplicas(const std::string& module) {
  StatusOr<ModuleView> view = ModuleView::Read(module);
  if (!view.ok()) return InvalidArgument("the partitioned program is not a readable HloModuleProto");
  return PartitionsAsReplicas(view.value());
}

StatusOr<std::string> PartitionsAsReplicas(const ModuleView& view) {
  ModuleEditor editor(view);
  for (const ComputationView& computation : view.computations()) {
    for (const InstructionView& instruction : computation.instructions) {
      if (instruction.opcode == "replica-id") {
        return Unimplemented("'" + instruction.name + "' asks for the replica id in a program of several partitions");
      }
      if (instruction.opcode == "partition-id") {
        editor.Replace(instruction, {Rewritten(view, instruction, {}, "replica-id")});
      } else if (NamesCores(instruction.opcode)) {
        if (instruction.channel_id == 0) {
          return Unimplemented("'" + instruction.name + "' (" + instruction.opcode +
                               ") is cross-replica in a program of several partitions");
        }
        editor.Replace(instruction, {Rewritten(view, instruction,
                                               {fields::kInstructionChannelId, fields::kInstructionUseGlobalDeviceIds},
                                               nullptr)});
      }
    }
  }
  return editor.Write();
}

}  // namespace pjrt_neuron::hlo
