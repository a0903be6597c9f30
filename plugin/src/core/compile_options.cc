#include "core/compile_options.h"

#include <cstdint>

namespace pjrt_neuron::core {
namespace {

// Field numbers in xla/pjrt/proto/compile_options.proto and xla/xla.proto.
constexpr uint32_t kExecutableBuildOptionsField = 3;  // CompileOptionsProto
constexpr uint32_t kNumReplicasField = 4;             // ExecutableBuildOptionsProto
constexpr uint32_t kNumPartitionsField = 5;

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

  // Reads one field; a length-delimited payload is returned in *payload.
  bool Field(uint32_t* number, uint32_t* wire_type, uint64_t* scalar, std::string* payload) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    switch (*wire_type) {
      case 0: return Varint(scalar);
      case 1: return Skip(8);
      case 5: return Skip(4);
      case 2: {
        uint64_t length;
        if (!Varint(&length) || length > static_cast<uint64_t>(end_ - p_)) return false;
        payload->assign(p_, length);
        p_ += length;
        return true;
      }
      default: return false;
    }
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

Status Malformed() { return InvalidArgument("compile_options is not a serialized xla.CompileOptionsProto"); }

}  // namespace

StatusOr<ReplicaLayout> ReadReplicaLayout(const std::string& serialized_options) {
  ReplicaLayout layout;
  WireReader top(serialized_options);
  while (!top.done()) {
    uint32_t number, wire_type;
    uint64_t scalar = 0;
    std::string payload;
    if (!top.Field(&number, &wire_type, &scalar, &payload)) return Malformed();
    if (number != kExecutableBuildOptionsField || wire_type != 2) continue;
    WireReader build(payload);  // repeated occurrences merge, so later values win
    while (!build.done()) {
      uint32_t inner_number, inner_type;
      uint64_t value = 0;
      std::string ignored;
      if (!build.Field(&inner_number, &inner_type, &value, &ignored)) return Malformed();
      if (inner_type != 0) continue;
      if (inner_number == kNumReplicasField) layout.num_replicas = static_cast<int>(value);
      if (inner_number == kNumPartitionsField) layout.num_partitions = static_cast<int>(value);
    }
  }
  return layout;
}

StatusOr<std::string> NormalizeCompileOptions(const std::string& serialized_options, ReplicaLayout* layout) {
  PN_ASSIGN_OR_RETURN(*layout, ReadReplicaLayout(serialized_options));
  std::string build_options;
  if (layout->num_replicas <= 0) {
    AppendVarint(&build_options, kNumReplicasField << 3);
    AppendVarint(&build_options, 1);
    layout->num_replicas = 1;
  }
  if (layout->num_partitions <= 0) {
    AppendVarint(&build_options, kNumPartitionsField << 3);
    AppendVarint(&build_options, 1);
    layout->num_partitions = 1;
  }
  std::string out = serialized_options;
  if (!build_options.empty()) {  // an appended sub-message merges into the existing one
    AppendVarint(&out, (kExecutableBuildOptionsField << 3) | 2);
    AppendVarint(&out, build_options.size());
    out += build_options;
  }
  return out;
}

}  // namespace pjrt_neuron::core
