// Restates a partitioned program's partitions as replicas (partitions_as_replicas.h).
#include "hlo/partitions_as_replicas.h"

#include <initializer_list>

#include "hlo/hlo_fields.h"
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

struct Read {
  std::string name;
  std::string opcode;
  bool has_channel = false;
};

bool ReadInstruction(const std::string& bytes, Read* out) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == fields::kInstructionName) out->name = f.payload;
    if (f.number == fields::kInstructionOpcode) out->opcode = f.payload;
    if (f.number == fields::kInstructionChannelId && f.varint != 0) out->has_channel = true;
  }
  return true;
}

// The instruction with `drop` fields removed and, when `opcode` is set, that opcode.
std::string Rewritten(const std::string& bytes, std::initializer_list<uint32_t> drop, const char* opcode) {
  std::string out;
  WireReader reader(bytes);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    bool dropped = false;
    for (uint32_t number : drop) dropped = dropped || f.number == number;
    if (opcode != nullptr && f.number == fields::kInstructionOpcode) {
      AppendBytesField(&out, fields::kInstructionOpcode, opcode);
    } else if (!dropped) {
      out += f.raw;
    }
  }
  return out;
}

StatusOr<std::string> Computation(const std::string& computation) {
  std::string out;
  WireReader reader(computation);
  Field g;
  while (!reader.done()) {
    if (!reader.Next(&g)) return InvalidArgument("a computation of the program is malformed");
    if (g.number != fields::kComputationInstructions || g.wire_type != kLengthDelimited) {
      out += g.raw;
      continue;
    }
    Read instruction;
    if (!ReadInstruction(g.payload, &instruction)) return InvalidArgument("an instruction of the program is malformed");
    if (instruction.opcode == "replica-id") {
      return Unimplemented("'" + instruction.name + "' asks for the replica id in a program of several partitions");
    }
    if (instruction.opcode == "partition-id") {
      AppendBytesField(&out, fields::kComputationInstructions, Rewritten(g.payload, {}, "replica-id"));
    } else if (NamesCores(instruction.opcode)) {
      if (!instruction.has_channel) {
        return Unimplemented("'" + instruction.name + "' (" + instruction.opcode +
                             ") is cross-replica in a program of several partitions");
      }
      AppendBytesField(&out, fields::kComputationInstructions,
                       Rewritten(g.payload, {fields::kInstructionChannelId, fields::kInstructionUseGlobalDeviceIds},
                                 nullptr));
    } else {
      out += g.raw;
    }
  }
  return out;
}

}  // namespace

StatusOr<std::string> PartitionsAsReplicas(const std::string& module) {
  std::string out;
  WireReader reader(module);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return InvalidArgument("the partitioned program is not a readable HloModuleProto");
    if (f.number != fields::kModuleComputations || f.wire_type != kLengthDelimited) {
      out += f.raw;
      continue;
    }
    PN_ASSIGN_OR_RETURN(std::string computation, Computation(f.payload));
    AppendBytesField(&out, fields::kModuleComputations, computation);
  }
  return out;
}

}  // namespace pjrt_neuron::hlo
