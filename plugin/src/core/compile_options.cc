#include "core/compile_options.h"

#include <vector>

namespace pjrt_neuron::core {
namespace {

// Field numbers in xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr uint32_t kExecutableBuildOptionsField = 3;  // CompileOptionsProto
constexpr uint32_t kDeviceOrdinalField = 1;           // ExecutableBuildOptionsProto
constexpr uint32_t kNumReplicasField = 4;
constexpr uint32_t kNumPartitionsField = 5;
constexpr uint32_t kDeviceAssignmentField = 9;
constexpr uint32_t kComputationDevicesField = 3;  // DeviceAssignmentProto
constexpr uint32_t kReplicaDeviceIdsField = 1;    // DeviceAssignmentProto.ComputationDevice

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;
  std::string payload;  // length-delimited fields
  std::string raw;      // the whole field, tag included, to copy it unchanged
};

class WireReader {
 public:
  explicit WireReader(const std::string& bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  bool done() const { return p_ >= end_; }

  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      uint8_t byte = static_cast<uint8_t>(*p_++);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool Next(Field* field) {
    const char* start = p_;
    uint64_t tag;
    if (!Varint(&tag)) return false;
    field->number = static_cast<uint32_t>(tag >> 3);
    field->wire_type = static_cast<uint32_t>(tag & 7);
    bool ok = false;
    switch (field->wire_type) {
      case kVarint: ok = Varint(&field->varint); break;
      case kFixed64: ok = Skip(8); break;
      case kFixed32: ok = Skip(4); break;
      case kLengthDelimited: {
        uint64_t length;
        ok = Varint(&length) && length <= static_cast<uint64_t>(end_ - p_);
        if (ok) {
          field->payload.assign(p_, length);
          p_ += length;
        }
        break;
      }
      default: break;
    }
    if (ok) field->raw.assign(start, p_);
    return ok;
  }

 private:
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const char* p_;
  const char* end_;
};

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendVarintField(std::string* out, uint32_t number, uint64_t value) {
  AppendVarint(out, number << 3 | kVarint);
  AppendVarint(out, value);
}

void AppendBytesField(std::string* out, uint32_t number, const std::string& payload) {
  AppendVarint(out, number << 3 | kLengthDelimited);
  AppendVarint(out, payload.size());
  *out += payload;
}

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

StatusOr<std::string> MapBuildOptions(const std::string& bytes, const DeviceIdMap& map, ReplicaLayout* layout) {
  std::string out;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return Malformed("compile_options");
    if (f.number == kNumReplicasField && f.wire_type == kVarint) layout->num_replicas = static_cast<int>(f.varint);
    if (f.number == kNumPartitionsField && f.wire_type == kVarint) layout->num_partitions = static_cast<int>(f.varint);
    if (f.number == kDeviceOrdinalField && f.wire_type == kVarint && static_cast<int64_t>(f.varint) >= 0) {
      PN_ASSIGN_OR_RETURN(int64_t mapped, map(static_cast<int64_t>(f.varint)));
      AppendVarintField(&out, kDeviceOrdinalField, static_cast<uint64_t>(mapped));
    } else if (f.number == kDeviceAssignmentField && f.wire_type == kLengthDelimited) {
      PN_ASSIGN_OR_RETURN(std::string mapped, MapDeviceAssignment(f.payload, map));
      AppendBytesField(&out, kDeviceAssignmentField, mapped);
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
                                              ReplicaLayout* layout) {
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
  if (!defaults.empty()) AppendBytesField(&out, kExecutableBuildOptionsField, defaults);  // merges into the first
  return out;
}

}  // namespace pjrt_neuron::core
