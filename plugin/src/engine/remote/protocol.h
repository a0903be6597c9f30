// Framed messages between a framework process and the instance daemon, over a Unix socket.
// Both ends are this plugin at the same version, so the encoding is plain native-endian fields.
#pragma once

#include <cstdint>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "pjrt_c_api.h"

namespace pjrt_neuron::engine::remote {

enum class Op : uint8_t {
  kHello = 1,
  kBufferFromHost,
  kCreateUninitialized,
  kToHost,
  kCopyRawToHost,
  kCopyTo,
  kReleaseBuffer,
  kDeleteBuffer,
  kCompile,
  kDeserialize,
  kExecutableQuery,
  kExecute,
  kReleaseExecutable,
  kDeleteExecutable,
  kDefaultDeviceAssignment,
  kAttach,  // a further connection of a process that said hello on its first one
};

// Releases are not answered: nothing can fail that the caller could act on, and a step of a
// training loop frees dozens of buffers.
inline bool IsOneWay(Op op) { return op == Op::kReleaseBuffer || op == Op::kReleaseExecutable; }

enum class Query : uint8_t {
  kFingerprint = 1,
  kCostAnalysis,
  kSizeOfGeneratedCode,
  kMemoryStats,
  kSerialize,
  kOptimizedProgram,
  kSerializedDeviceAssignment,
};

class Writer {
 public:
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& i64(int64_t v) { return raw(&v, sizeof(v)); }
  Writer& f64(double v) { return raw(&v, sizeof(v)); }
  Writer& bytes(const void* data, size_t size) {
    i64(static_cast<int64_t>(size));
    return raw(data, size);
  }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  template <typename Int>
  Writer& ints(const std::vector<Int>& values) {
    i64(static_cast<int64_t>(values.size()));
    for (Int v : values) i64(static_cast<int64_t>(v));
    return *this;
  }
  std::string& buffer() { return buffer_; }

 private:
  Writer& raw(const void* data, size_t size) {
    buffer_.append(static_cast<const char*>(data), size);
    return *this;
  }
  std::string buffer_;
};

// Reads a message; a short or malformed message sets `ok()` false instead of reading past the end.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  uint8_t u8() {
    uint8_t v = 0;
    raw(&v, 1);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    raw(&v, sizeof(v));
    return v;
  }
  double f64() {
    double v = 0;
    raw(&v, sizeof(v));
    return v;
  }
  std::string str() {
    int64_t size = i64();
    if (size < 0 || static_cast<size_t>(size) > remaining()) {
      ok_ = false;
      return {};
    }
    std::string s = data_.substr(offset_, size);
    offset_ += size;
    return s;
  }
  // A view of the next length-prefixed bytes without copying them.
  const char* view(size_t* size) {
    int64_t n = i64();
    if (n < 0 || static_cast<size_t>(n) > remaining()) {
      ok_ = false;
      *size = 0;
      return nullptr;
    }
    const char* p = data_.data() + offset_;
    offset_ += n;
    *size = n;
    return p;
  }
  template <typename Int = int64_t>
  std::vector<Int> ints() {
    int64_t n = i64();
    std::vector<Int> values;
    if (n < 0 || static_cast<size_t>(n) > remaining() / sizeof(int64_t)) {
      ok_ = false;
      return values;
    }
    for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<Int>(i64()));
    return values;
  }
  bool ok() const { return ok_; }

 private:
  size_t remaining() const { return data_.size() - offset_; }
  void raw(void* out, size_t size) {
    if (size > remaining()) {
      ok_ = false;
      std::memset(out, 0, size);
      return;
    }
    std::memcpy(out, data_.data() + offset_, size);
    offset_ += size;
  }
  const std::string& data_;
  size_t offset_ = 0;
  bool ok_ = true;
};

// A PJRT memory layout as owned data, so it can cross the socket.
struct LayoutData {
  PJRT_Buffer_MemoryLayout_Type type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  std::vector<int64_t> minor_to_major;
  std::vector<int64_t> tile_dims;
  std::vector<size_t> tile_dim_sizes;
  std::vector<int64_t> byte_strides;

  static LayoutData From(const PJRT_Buffer_MemoryLayout& layout) {
    LayoutData data;
    data.type = layout.type;
    if (layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
      const auto& t = layout.tiled;
      data.minor_to_major.assign(t.minor_to_major, t.minor_to_major + t.minor_to_major_size);
      size_t total_tile_dims = 0;
      for (size_t i = 0; i < t.num_tiles; ++i) total_tile_dims += t.tile_dim_sizes[i];
      data.tile_dim_sizes.assign(t.tile_dim_sizes, t.tile_dim_sizes + t.num_tiles);
      data.tile_dims.assign(t.tile_dims, t.tile_dims + total_tile_dims);
    } else {
      data.byte_strides.assign(layout.strides.byte_strides, layout.strides.byte_strides + layout.strides.num_byte_strides);
    }
    return data;
  }
  // Points `layout` into this object, which must outlive it.
  void Fill(PJRT_Buffer_MemoryLayout* layout) const {
    std::memset(layout, 0, sizeof(*layout));
    layout->struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    layout->type = type;
    if (type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
      layout->tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
      layout->tiled.minor_to_major = minor_to_major.data();
      layout->tiled.minor_to_major_size = minor_to_major.size();
      layout->tiled.tile_dims = tile_dims.data();
      layout->tiled.tile_dim_sizes = tile_dim_sizes.data();
      layout->tiled.num_tiles = tile_dim_sizes.size();
    } else {
      layout->strides.struct_size = PJRT_Buffer_MemoryLayout_Strides_STRUCT_SIZE;
      layout->strides.byte_strides = byte_strides.data();
      layout->strides.num_byte_strides = byte_strides.size();
    }
  }
  void Write(Writer& w) const {
    w.u8(static_cast<uint8_t>(type)).ints(minor_to_major).ints(tile_dims).ints(tile_dim_sizes).ints(byte_strides);
  }
  static LayoutData Read(Reader& r) {
    LayoutData data;
    data.type = static_cast<PJRT_Buffer_MemoryLayout_Type>(r.u8());
    data.minor_to_major = r.ints();
    data.tile_dims = r.ints();
    data.tile_dim_sizes = r.ints<size_t>();
    data.byte_strides = r.ints();
    return data;
  }
};

// One frame: an 8-byte length, then the payload. False when the peer has gone. A frame may carry
// one file descriptor (a connection's new SharedWindow); `received_fd` gets it, or -1.
bool SendFrame(int fd, const std::string& payload, int pass_fd = -1);
bool ReceiveFrame(int fd, std::string* payload, int* received_fd = nullptr);

// Transfers from this size up travel through shared memory instead of the socket: the socket
// would copy them twice more, and a 16 MiB round trip cost 5 times the in-process one.
constexpr size_t kSharedTransferBytes = size_t{64} << 10;
// A window up to this size stays mapped for the connection's next transfers; a larger one is
// used once, so rare huge transfers do not pin shared memory.
constexpr size_t kKeptWindowBytes = size_t{256} << 20;

// Shared memory of one connection, mapped by the framework process and by the daemon.
class SharedWindow {
 public:
  SharedWindow() = default;
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;
  ~SharedWindow() { Reset(); }

  // A new window of at least `size` bytes; false (and no window) when shared memory is unavailable.
  bool Create(size_t size);
  // Maps a window the peer created; takes ownership of `fd`.
  bool Adopt(int fd);
  void Reset();

  char* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  bool kept() const { return size_ <= kKeptWindowBytes; }
  bool Holds(size_t bytes) const { return data_ != nullptr && bytes <= size_; }

 private:
  int fd_ = -1;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// Where a transfer's bytes are: after the u8 tag, inline bytes or just their size in the window.
enum class Placement : uint8_t { kInline = 0, kWindow = 1 };

// A reply starts with the status; on success the rest is the operation's result.
inline void WriteStatus(Writer& w, const Status& status) {
  w.u8(static_cast<uint8_t>(status.code()));
  w.str(status.message());
}
inline Status ReadStatus(Reader& r) {
  auto code = static_cast<ErrorCode>(r.u8());
  std::string message = r.str();
  if (!r.ok()) return Internal("malformed reply from the instance daemon");
  return code == ErrorCode::kOk ? Status::Ok() : Status(code, message);
}

// The daemon's abstract socket address for an instance, lock directory and engine.
std::string DaemonAddress(const std::string& instance_key);
int ConnectTo(const std::string& address);  // -1 when nobody listens
int ListenOn(const std::string& address);   // -1 when another daemon already listens

inline void WriteAttributes(Writer& w, const Attributes& attributes) {
  w.i64(static_cast<int64_t>(attributes.size()));
  for (const Attribute& a : attributes) {
    w.str(a.name).u8(static_cast<uint8_t>(a.value.index()));
    if (auto* s = std::get_if<std::string>(&a.value)) w.str(*s);
    if (auto* i = std::get_if<int64_t>(&a.value)) w.i64(*i);
    if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) w.ints(*v);
    if (auto* f = std::get_if<float>(&a.value)) w.f64(*f);
    if (auto* b = std::get_if<bool>(&a.value)) w.u8(*b ? 1 : 0);
  }
}

inline Attributes ReadAttributes(Reader& r) {
  Attributes attributes;
  int64_t n = r.i64();
  for (int64_t k = 0; k < n && r.ok(); ++k) {
    Attribute a;
    a.name = r.str();
    switch (r.u8()) {
      case 0: a.value = r.str(); break;
      case 1: a.value = r.i64(); break;
      case 2: a.value = r.ints(); break;
      case 3: a.value = static_cast<float>(r.f64()); break;
      default: a.value = r.u8() != 0; break;
    }
    attributes.push_back(std::move(a));
  }
  return attributes;
}

}  // namespace pjrt_neuron::engine::remote
