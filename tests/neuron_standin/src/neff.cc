// Reads the stand-in's private NEFF container (layout: README.md, "The NEFF container").
#include "neff.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "element_types.h"

namespace standin {
namespace {

constexpr char kMagic[8] = {'N', 'E', 'F', 'F', 'S', 'T', 'D', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 8 + 4 * 4 + 8 * 2;
constexpr size_t kRecordSize = 4 * 6 + 8;
constexpr size_t kChecksumSize = 4;

// CRC-32 as zlib computes it (reflected, polynomial 0xEDB88320); the Python writer uses zlib.
uint32_t Crc32(const uint8_t* data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool U32(uint32_t* value) { return Bytes(value, 4); }
  bool U64(uint64_t* value) { return Bytes(value, 8); }
  bool Bytes(void* out, size_t n) {
    if (n > size_ - position_) return false;
    std::memcpy(out, data_ + position_, n);  // little-endian host, as the format is
    position_ += n;
    return true;
  }
  size_t position() const { return position_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

bool Fail(std::string* error, const std::string& why) {
  *error = why;
  return false;
}

bool ReadTable(Reader* reader, uint32_t count, size_t table_end, Neff* neff,
               std::string* error) {
  for (uint32_t i = 0; i < count; ++i) {
    NeffTensor t;
    uint32_t alias = 0, ndim = 0, name_length = 0;
    if (!reader->U32(&t.usage) || !reader->U32(&t.position) || !reader->U32(&alias) ||
        !reader->U32(&t.nrt_dtype) || !reader->U32(&t.xla_element_type) ||
        !reader->U32(&ndim) || !reader->U64(&t.byte_size) || ndim > 64) {
      return Fail(error, "tensor record " + std::to_string(i) + " is truncated");
    }
    t.alias_output = static_cast<int32_t>(alias);
    t.shape.resize(ndim);
    for (uint32_t& d : t.shape) {
      if (!reader->U32(&d)) return Fail(error, "tensor record " + std::to_string(i) + " shape");
    }
    if (!reader->U32(&name_length) || name_length == 0 || name_length > 255) {
      return Fail(error, "tensor record " + std::to_string(i) + " has a bad name length");
    }
    t.name.resize(name_length);
    if (!reader->Bytes(&t.name[0], name_length) || reader->position() > table_end) {
      return Fail(error, "tensor record " + std::to_string(i) + " runs past the table");
    }
    neff->tensors.push_back(std::move(t));
  }
  if (reader->position() != table_end) return Fail(error, "the tensor table has trailing bytes");
  return true;
}

bool CheckTable(Neff* neff, std::string* error) {
  std::vector<bool> inputs, outputs;
  for (const NeffTensor& t : neff->tensors) {
    if (t.usage > 1) return Fail(error, "tensor " + t.name + " has usage " + std::to_string(t.usage));
    std::vector<bool>& seen = t.usage == 0 ? inputs : outputs;
    if (t.position >= neff->tensors.size()) return Fail(error, "tensor " + t.name + " position");
    if (seen.size() <= t.position) seen.resize(t.position + 1, false);
    if (seen[t.position]) return Fail(error, "two tensors at one position, one is " + t.name);
    seen[t.position] = true;
    const ElementType* type = FindElementType(t.xla_element_type);
    if (!type) {
      return Fail(error, "tensor " + t.name + " has element type " +
                             std::to_string(t.xla_element_type));
    }
    uint64_t bytes = type->byte_size;
    for (uint32_t d : t.shape) bytes *= d;
    if (bytes != t.byte_size) return Fail(error, "tensor " + t.name + " size disagrees with its shape");
    for (const NeffTensor& other : neff->tensors) {
      if (&other != &t && other.name == t.name) return Fail(error, "tensor name " + t.name + " twice");
    }
  }
  if (std::find(inputs.begin(), inputs.end(), false) != inputs.end() ||
      std::find(outputs.begin(), outputs.end(), false) != outputs.end()) {
    return Fail(error, "the tensor table misses a position");
  }
  neff->input_count = static_cast<uint32_t>(inputs.size());
  neff->output_count = static_cast<uint32_t>(outputs.size());
  for (const NeffTensor& t : neff->tensors) {
    if (t.alias_output >= 0 && (t.usage != 0 || static_cast<uint32_t>(t.alias_output) >= neff->output_count)) {
      return Fail(error, "tensor " + t.name + " aliases a missing output");
    }
  }
  return true;
}

}  // namespace

std::vector<const NeffTensor*> Neff::Inputs() const {
  std::vector<const NeffTensor*> ordered(input_count);
  for (const NeffTensor& t : tensors) {
    if (t.usage == 0) ordered[t.position] = &t;
  }
  return ordered;
}

std::vector<const NeffTensor*> Neff::Outputs() const {
  std::vector<const NeffTensor*> ordered(output_count);
  for (const NeffTensor& t : tensors) {
    if (t.usage == 1) ordered[t.position] = &t;
  }
  return ordered;
}

NeffProblem ReadNeff(const void* data, size_t size, Neff* neff, std::string* error) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (!data || size < kHeaderSize + kChecksumSize) {
    *error = "the NEFF is " + std::to_string(size) + " bytes, shorter than its header";
    return NeffProblem::kMalformed;
  }
  Reader reader(bytes, size);
  char magic[8];
  uint32_t version = 0, count = 0;
  uint64_t program_size = 0, table_size = 0;
  reader.Bytes(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) {
    *error = "not a NEFF of the stand-in (bad magic)";
    return NeffProblem::kMalformed;
  }
  reader.U32(&version);
  if (version != kFormatVersion) {
    *error = "NEFF format version " + std::to_string(version) + ", this runtime reads " +
             std::to_string(kFormatVersion);
    return NeffProblem::kUnsupportedVersion;
  }
  reader.U32(&neff->target_family);
  reader.U32(&neff->lnc);
  reader.U32(&count);
  reader.U64(&program_size);
  reader.U64(&table_size);
  if (table_size > size || program_size > size ||
      kHeaderSize + table_size + program_size + kChecksumSize != size) {
    *error = "the NEFF is " + std::to_string(size) + " bytes, its header says otherwise";
    return NeffProblem::kMalformed;
  }
  uint32_t stored_checksum = 0;
  std::memcpy(&stored_checksum, bytes + size - kChecksumSize, kChecksumSize);
  if (Crc32(bytes, size - kChecksumSize) != stored_checksum) {
    *error = "the NEFF checksum does not match (corrupt or truncated)";
    return NeffProblem::kMalformed;
  }
  if (count > table_size / kRecordSize ||
      !ReadTable(&reader, count, kHeaderSize + table_size, neff, error) ||
      !CheckTable(neff, error)) {
    if (error->empty()) *error = "the tensor table is inconsistent";
    return NeffProblem::kMalformed;
  }
  neff->program.assign(reinterpret_cast<const char*>(bytes) + kHeaderSize + table_size,
                       program_size);
  return NeffProblem::kNone;
}

}  // namespace standin
