// Compile options' placement, read and written (placement.h).
#include "engine/neuron/placement.h"

#include "hlo/collective_program.h"
#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::engine::neuron {
namespace {

using hlo::Field;
using hlo::WireReader;

namespace fields = hlo::compile_options_fields;

Status Malformed() { return InvalidArgument("compile_options is not a valid xla.CompileOptionsProto"); }

Status ReadAssignment(const std::string& bytes, std::vector<int>* cores) {
  cores->clear();
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed();
    if (f.number != fields::kAssignmentComputationDevices || f.wire_type != hlo::kLengthDelimited) continue;
    WireReader devices(f.payload);
    Field g;
    while (!devices.done()) {
      if (!devices.Next(&g)) return Malformed();
      if (g.number != fields::kComputationDeviceReplicaIds) continue;
      if (g.wire_type == hlo::kVarint) {
        cores->push_back(static_cast<int>(g.varint));
        continue;
      }
      WireReader packed(g.payload);
      uint64_t id;
      while (!packed.done()) {
        if (!packed.Varint(&id)) return Malformed();
        cores->push_back(static_cast<int>(id));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Placement> ReadPlacement(const std::string& compile_options) {
  Placement placement;
  WireReader reader(compile_options);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed();
    if (f.number != fields::kBuildOptions || f.wire_type != hlo::kLengthDelimited) continue;
    WireReader build(f.payload);
    Field g;
    while (!build.done()) {
      if (!build.Next(&g)) return Malformed();
      if (g.number == fields::kNumReplicas && g.wire_type == hlo::kVarint) {
        placement.num_replicas = static_cast<int>(g.varint);
      }
      if (g.number == fields::kNumPartitions && g.wire_type == hlo::kVarint) {
        placement.num_partitions = static_cast<int>(g.varint);
      }
      if (g.number == fields::kUseSpmdPartitioning && g.wire_type == hlo::kVarint) placement.spmd = g.varint != 0;
      if (g.number == fields::kDeviceOrdinal && g.wire_type == hlo::kVarint) {
        placement.device_ordinal = static_cast<int>(static_cast<int64_t>(g.varint));
      }
      if (g.number == fields::kDeviceAssignment && g.wire_type == hlo::kLengthDelimited) {
        PN_RETURN_IF_ERROR(ReadAssignment(g.payload, &placement.cores));
      }
    }
  }
  if (placement.num_replicas < 1 || placement.num_partitions < 1) {
    return InvalidArgument("compile_options ask for " + std::to_string(placement.num_replicas) + " replicas and " +
                           std::to_string(placement.num_partitions) + " partitions");
  }
  const size_t needed = static_cast<size_t>(placement.num_replicas) * placement.num_partitions;
  if (!placement.cores.empty() && placement.cores.size() != needed) {
    return InvalidArgument("the device assignment names " + std::to_string(placement.cores.size()) +
                           " devices for " + std::to_string(needed) + " replicas x partitions");
  }
  return placement;
}

std::string DeviceAssignmentBytes(int num_replicas, int num_partitions, const std::vector<int>& cores) {
  std::string out;
  hlo::AppendVarintField(&out, fields::kAssignmentReplicaCount, static_cast<uint64_t>(num_replicas));
  hlo::AppendVarintField(&out, fields::kAssignmentComputationCount, static_cast<uint64_t>(num_partitions));
  for (int p = 0; p < num_partitions; ++p) {
    std::string ids;
    for (int r = 0; r < num_replicas; ++r) {
      const size_t at = static_cast<size_t>(p) * num_replicas + r;
      hlo::AppendVarint(&ids, static_cast<uint64_t>(at < cores.size() ? cores[at] : 0));
    }
    std::string devices;
    hlo::AppendBytesField(&devices, fields::kComputationDeviceReplicaIds, ids);
    hlo::AppendBytesField(&out, fields::kAssignmentComputationDevices, devices);
  }
  return out;
}

// A program whose cores compute alike needs no ranks; a malformed one is treated as needing them.
bool NeedsRanks(const std::string& module) { return !hlo::RunsAlikeOnEveryCore(module, "hlo"); }

}  // namespace pjrt_neuron::engine::neuron
