// Reads and adjusts serialized CompileOptionsProto fields on the wire (compile_options.h).
#include "hlo/compile_options.h"

#include <algorithm>
#include <vector>

#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {
namespace {

// Field numbers in xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr uint32_t kExecutableBuildOptionsField = 3;  // CompileOptionsProto
constexpr uint32_t kCompilePortableExecutableField = 4;
constexpr uint32_t kExecutableOptionsField = 2;  // ExecutableAndOptionsProto.compile_options
constexpr uint32_t kDeviceOrdinalField = 1;           // ExecutableBuildOptionsProto
constexpr uint32_t kNumReplicasField = 4;
constexpr uint32_t kNumPartitionsField = 5;
constexpr uint32_t kDeviceAssignmentField = 9;
constexpr uint32_t kDebugOptionsField = 3;  // ExecutableBuildOptionsProto
constexpr uint32_t kComputationDevicesField = 3;  // DeviceAssignmentProto
constexpr uint32_t kAssignmentReplicaCountField = 1;      // DeviceAssignmentProto
constexpr uint32_t kAssignmentComputationCountField = 2;  // DeviceAssignmentProto
constexpr uint32_t kReplicaDeviceIdsField = 1;    // DeviceAssignmentProto.ComputationDevice

Status Malformed(const char* what) { return InvalidArgument(std::string(what) + " is not valid protobuf"); }

// ComputationDevice: ids may come packed or one per field.
StatusOr<std::string> MapComputationDevice(const std::string& bytes, const DeviceIdMap& map) {
  std::vector<int64_t> ids;
  std::string rest;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("the device assignment");
    if (f.number == kReplicaDeviceIdsField && f.wire_type == kVarint) {
      ids.push_back(static_cast<int64_t>(f.varint));
    } else if (f.number == kReplicaDeviceIdsField && f.wire_type == kLengthDelimited) {
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
  if (!ids.empty()) AppendBytesField(&rest, kReplicaDeviceIdsField, packed);
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
    if (f.number == kNumReplicasField && f.wire_type == kVarint) layout->num_replicas = static_cast<int>(f.varint);
    if (f.number == kNumPartitionsField && f.wire_type == kVarint) layout->num_partitions = static_cast<int>(f.varint);
    if ((f.number == kDeviceOrdinalField && f.wire_type == kVarint && static_cast<int64_t>(f.varint) >= 0) ||
        (f.number == kDeviceAssignmentField && f.wire_type == kLengthDelimited)) {
      layout->placed = true;
    }
    if (f.number == kDeviceOrdinalField && f.wire_type == kVarint && static_cast<int64_t>(f.varint) >= 0) {
      PN_ASSIGN_OR_RETURN(int64_t mapped, map(static_cast<int64_t>(f.varint)));
      AppendVarintField(&out, kDeviceOrdinalField, static_cast<uint64_t>(mapped));
    } else if (f.number == kDeviceAssignmentField && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapDeviceAssignment(f.payload, map));
      AppendBytesField(&out, kDeviceAssignmentField, mapped);
    } else if (f.number == kDebugOptionsField && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string canonical, CanonicalDebugOptions(f.payload));
      AppendBytesField(&out, kDebugOptionsField, canonical);
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
    if (f.number == kComputationDevicesField && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapComputationDevice(f.payload, map));
      AppendBytesField(&out, kComputationDevicesField, mapped);
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
    if (f.number == kExecutableBuildOptionsField && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapBuildOptions(f.payload, to_engine_id, layout));
      AppendBytesField(&out, kExecutableBuildOptionsField, mapped);
    } else {
      out += f.raw;
    }
  }
  std::string defaults;
  if (layout->num_replicas <= 0) {
    AppendVarintField(&defaults, kNumReplicasField, 1);
    layout->num_replicas = 1;
  }
  if (layout->num_partitions <= 0) {
    AppendVarintField(&defaults, kNumPartitionsField, 1);
    layout->num_partitions = 1;
  }
  const size_t cores_needed = static_cast<size_t>(layout->num_replicas) * layout->num_partitions;
  if (!layout->placed && default_engine_cores != nullptr && default_engine_cores->size() >= cores_needed) {
    std::string assignment;
    for (int partition = 0; partition < layout->num_partitions; ++partition) {
      std::string ids;
      for (int replica = 0; replica < layout->num_replicas; ++replica) {
        AppendVarintField(&ids, kReplicaDeviceIdsField,
                          static_cast<uint64_t>((*default_engine_cores)[partition * layout->num_replicas + replica]));
      }
      AppendBytesField(&assignment, kComputationDevicesField, ids);
    }
    AppendVarintField(&assignment, kAssignmentReplicaCountField, static_cast<uint64_t>(layout->num_replicas));
    AppendVarintField(&assignment, kAssignmentComputationCountField, static_cast<uint64_t>(layout->num_partitions));
    AppendBytesField(&defaults, kDeviceAssignmentField, assignment);
  }
  if (!defaults.empty()) AppendBytesField(&out, kExecutableBuildOptionsField, defaults);  // merges into the first
  return out;
}

constexpr uint32_t kCompileOptionsEnvOverrides = 7;  // CompileOptionsProto.env_option_overrides
constexpr uint32_t kOverrideString = 1;              // OptionOverrideProto
constexpr uint32_t kOverrideBool = 2;

void AppendOptionOverride(std::string* options, const std::string& flag, const std::string* text, bool flag_value) {
  std::string value;
  if (text != nullptr) {
    AppendBytesField(&value, kOverrideString, *text);
  } else {
    AppendVarintField(&value, kOverrideBool, flag_value ? 1 : 0);
  }
  std::string entry;
  AppendBytesField(&entry, 1, flag);
  AppendBytesField(&entry, 2, value);
  AppendBytesField(options, kCompileOptionsEnvOverrides, entry);
}

std::string PortableSingleCoreOptions(const std::string& serialized_options) {
  std::string out, build;
  WireReader reader(serialized_options);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return "";
    if (f.number == kCompilePortableExecutableField) continue;
    if (f.number != kExecutableBuildOptionsField || f.wire_type != kLengthDelimited) {
      out += f.raw;
      continue;
    }
    WireReader inner(f.payload);
    Field g;
    while (!inner.done()) {
      if (!inner.Next(&g)) return "";
      if (g.number == kDeviceOrdinalField || g.number == kNumReplicasField || g.number == kNumPartitionsField ||
          g.number == kDeviceAssignmentField) {
        continue;
      }
      build += g.raw;
    }
  }
  AppendVarintField(&build, kNumReplicasField, 1);
  AppendVarintField(&build, kNumPartitionsField, 1);
  AppendBytesField(&out, kExecutableBuildOptionsField, build);
  AppendVarintField(&out, kCompilePortableExecutableField, 1);
  return out;
}

std::string CompileOptionsOfSerializedExecutable(const std::string& serialized_executable) {
  WireReader reader(serialized_executable);
  Field f;
  std::string options;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == kExecutableOptionsField && f.wire_type == kLengthDelimited) options = f.payload;
  }
  return options;
}

}  // namespace pjrt_neuron::hlo
