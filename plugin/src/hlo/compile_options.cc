// Reads and adjusts serialized CompileOptionsProto fields on the wire (compile_options.h).
#include "hlo/compile_options.h"

#include <algorithm>
#include <vector>

#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

namespace fields = compile_options_fields;

Status Malformed(const char* what) { return InvalidArgument(std::string(what) + " is not valid protobuf"); }

// ComputationDevice: ids may come packed or one per field.
StatusOr<std::string> MapComputationDevice(const std::string& bytes, const DeviceIdMap& map) {
  std::vector<int64_t> ids;
  std::string rest;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("the device assignment");
    if (f.number == fields::kComputationDeviceReplicaIds && f.wire_type == kVarint) {
      ids.push_back(static_cast<int64_t>(f.varint));
    } else if (f.number == fields::kComputationDeviceReplicaIds && f.wire_type == kLengthDelimited) {
      WireReader packed(f.payload);
      while (!packed.done()) {
        uint64_t id;
        if (!packed.Varint(&id)) return Malformed("the device assignment");
        ids.push_back(static_cast<int64_t>(id));
      }
    } else {
      rest += f.raw;
    }
  }
  std::string packed;
  for (int64_t id : ids) {
    PN_ASSIGN_OR_RETURN(int64_t mapped, map(id));
    AppendVarint(&packed, static_cast<uint64_t>(mapped));
  }
  if (!ids.empty()) AppendBytesField(&rest, fields::kComputationDeviceReplicaIds, packed);
  return rest;
}

// DebugOptions carries maps, which frameworks serialise in hash order; sorting its fields
// gives equal options equal bytes, so the compile cache sees them as the same.
StatusOr<std::string> CanonicalDebugOptions(const std::string& bytes) {
  std::vector<Field> fields;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("compile_options");
    fields.push_back(f);
  }
  std::stable_sort(fields.begin(), fields.end(), [](const Field& a, const Field& b) {
    if (a.number != b.number) return a.number < b.number;
    // Only repeated and map fields repeat a number; their order carries no meaning here.
    return a.wire_type == kLengthDelimited && b.wire_type == kLengthDelimited && a.raw < b.raw;
  });
  std::string out;
  for (const Field& field : fields) out += field.raw;
  return out;
}

StatusOr<std::string> MapBuildOptions(const std::string& bytes, const DeviceIdMap& map, ReplicaLayout* layout) {
  std::string out;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("compile_options");
    if (f.number == fields::kNumReplicas && f.wire_type == kVarint) layout->num_replicas = static_cast<int>(f.varint);
    if (f.number == fields::kNumPartitions && f.wire_type == kVarint) {
      layout->num_partitions = static_cast<int>(f.varint);
    }
    if ((f.number == fields::kDeviceOrdinal && f.wire_type == kVarint && static_cast<int64_t>(f.varint) >= 0) ||
        (f.number == fields::kDeviceAssignment && f.wire_type == kLengthDelimited)) {
      layout->placed = true;
    }
    if (f.number == fields::kDeviceOrdinal && f.wire_type == kVarint && static_cast<int64_t>(f.varint) >= 0) {
      PN_ASSIGN_OR_RETURN(int64_t mapped, map(static_cast<int64_t>(f.varint)));
      AppendVarintField(&out, fields::kDeviceOrdinal, static_cast<uint64_t>(mapped));
    } else if (f.number == fields::kDeviceAssignment && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapDeviceAssignment(f.payload, map));
      AppendBytesField(&out, fields::kDeviceAssignment, mapped);
    } else if (f.number == fields::kDebugOptions && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string canonical, CanonicalDebugOptions(f.payload));
      AppendBytesField(&out, fields::kDebugOptions, canonical);
    } else {
      out += f.raw;
    }
  }
  return out;
}

}  // namespace

StatusOr<std::string> MapDeviceAssignment(const std::string& serialized_assignment, const DeviceIdMap& map) {
  std::string out;
  WireReader reader(serialized_assignment);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("the device assignment");
    if (f.number == fields::kAssignmentComputationDevices && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapComputationDevice(f.payload, map));
      AppendBytesField(&out, fields::kAssignmentComputationDevices, mapped);
    } else {
      out += f.raw;
    }
  }
  return out;
}

StatusOr<std::string> NormalizeCompileOptions(const std::string& serialized_options, const DeviceIdMap& to_engine_id,
                                              ReplicaLayout* layout,
                                              const std::vector<int64_t>* default_engine_cores) {
  *layout = ReplicaLayout();
  std::string out;
  WireReader reader(serialized_options);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("compile_options (an xla.CompileOptionsProto)");
    if (f.number == fields::kBuildOptions && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapBuildOptions(f.payload, to_engine_id, layout));
      AppendBytesField(&out, fields::kBuildOptions, mapped);
    } else {
      out += f.raw;
    }
  }
  std::string defaults;
  if (layout->num_replicas <= 0) {
    AppendVarintField(&defaults, fields::kNumReplicas, 1);
    layout->num_replicas = 1;
  }
  if (layout->num_partitions <= 0) {
    AppendVarintField(&defaults, fields::kNumPartitions, 1);
    layout->num_partitions = 1;
  }
  const size_t cores_needed = static_cast<size_t>(layout->num_replicas) * layout->num_partitions;
  if (!layout->placed && default_engine_cores != nullptr && default_engine_cores->size() >= cores_needed) {
    std::string assignment;
    for (int partition = 0; partition < layout->num_partitions; ++partition) {
      std::string ids;
      for (int replica = 0; replica < layout->num_replicas; ++replica) {
        AppendVarintField(&ids, fields::kComputationDeviceReplicaIds,
                          static_cast<uint64_t>((*default_engine_cores)[partition * layout->num_replicas + replica]));
      }
      AppendBytesField(&assignment, fields::kAssignmentComputationDevices, ids);
    }
    AppendVarintField(&assignment, fields::kAssignmentReplicaCount, static_cast<uint64_t>(layout->num_replicas));
    AppendVarintField(&assignment, fields::kAssignmentComputationCount, static_cast<uint64_t>(layout->num_partitions));
    AppendBytesField(&defaults, fields::kDeviceAssignment, assignment);
  }
  if (!defaults.empty()) AppendBytesField(&out, fields::kBuildOptions, defaults);  // merges into the first
  return out;
}

void AppendOptionOverride(std::string* options, const std::string& flag, const std::string* text, bool flag_value) {
  std::string value;
  if (text != nullptr) {
    AppendBytesField(&value, fields::kOverrideString, *text);
  } else {
    AppendVarintField(&value, fields::kOverrideBool, flag_value ? 1 : 0);
  }
  std::string entry;
  AppendBytesField(&entry, hlo_fields::kMapKey, flag);
  AppendBytesField(&entry, hlo_fields::kMapValue, value);
  AppendBytesField(options, fields::kEnvOptionOverrides, entry);
}

std::string PortableSingleCoreOptions(const std::string& serialized_options) {
  std::string out, build;
  WireReader reader(serialized_options);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return "";
    if (f.number == fields::kCompilePortableExecutable) continue;
    if (f.number != fields::kBuildOptions || f.wire_type != kLengthDelimited) {
      out += f.raw;
      continue;
    }
    WireReader inner(f.payload);
    Field g;
    while (!inner.done()) {
      if (!inner.Next(&g)) return "";
      if (g.number == fields::kDeviceOrdinal || g.number == fields::kNumReplicas ||
          g.number == fields::kNumPartitions || g.number == fields::kDeviceAssignment) {
        continue;
      }
      build += g.raw;
    }
  }
  AppendVarintField(&build, fields::kNumReplicas, 1);
  AppendVarintField(&build, fields::kNumPartitions, 1);
  AppendBytesField(&out, fields::kBuildOptions, build);
  AppendVarintField(&out, fields::kCompilePortableExecutable, 1);
  return out;
}

std::string CompileOptionsOfSerializedExecutable(const std::string& serialized_executable) {
  WireReader reader(serialized_executable);
  Field f;
  std::string options;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == fields::kExecutableCompileOptions && f.wire_type == kLengthDelimited) options = f.payload;
  }
  return options;
}

}  // namespace pjrt_neuron::hlo
