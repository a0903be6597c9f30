// The protobuf wire format, just enough to read and rewrite XLA's protos without linking
// protobuf: compile options, device assignments, HLO modules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pjrt_neuron::hlo {

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

inline void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// A packed repeated varint field's payload.
inline std::string PackedVarints(const std::vector<int64_t>& values) {
  std::string packed;
  for (int64_t value : values) AppendVarint(&packed, static_cast<uint64_t>(value));
  return packed;
}

inline void AppendVarintField(std::string* out, uint32_t number, uint64_t value) {
  AppendVarint(out, number << 3 | kVarint);
  AppendVarint(out, value);
}

inline void AppendBytesField(std::string* out, uint32_t number, const std::string& payload) {
  AppendVarint(out, number << 3 | kLengthDelimited);
  AppendVarint(out, payload.size());
  *out += payload;
}

}  // namespace pjrt_neuron::hlo
