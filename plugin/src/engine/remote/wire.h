// The transport between a framework process and the instance daemon: fields (Writer, Reader),
// frames on a Unix socket, the shared-memory window of large transfers, the socket address.
// The messages themselves are in protocol.h. Both ends are this plugin at the same version, so
// fields are plain native-endian values.
#pragma once

#include <cstdint>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace pjrt_neuron::engine::remote {

class Writer {
 public:
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& i64(int64_t v) { return raw(&v, sizeof(v)); }
  Writer& f64(double v) { return raw(&v, sizeof(v)); }
  Writer& bytes(const void* data, size_t size) {
    i64(static_cast<int64_t>(size));
    return raw(data, size);
  }
  Writer& str(std::string_view s) { return bytes(s.data(), s.size()); }
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
  Reader(std::string&&) = delete;  // reads the caller's string in place; a temporary would dangle
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
  // The next length-prefixed bytes without copying them: a view into the message.
  std::string_view view() {
    int64_t n = i64();
    if (n < 0 || static_cast<size_t>(n) > remaining()) {
      ok_ = false;
      return {};
    }
    std::string_view v(data_.data() + offset_, static_cast<size_t>(n));
    offset_ += n;
    return v;
  }
  template <typename Int = int64_t>
  std::vector<Int> ints() {
    std::vector<Int> values(static_cast<size_t>(count(sizeof(int64_t))));
    for (Int& v : values) v = static_cast<Int>(i64());
    return values;
  }
  // The length of a list whose elements take at least `element_bytes` each; 0, and not ok,
  // when the rest of the message could not hold that many.
  int64_t count(size_t element_bytes) {
    int64_t n = i64();
    if (n < 0 || static_cast<size_t>(n) > remaining() / element_bytes) {
      ok_ = false;
      return 0;
    }
    return n;
  }
  // For a field whose value is out of range.
  void Fail() { ok_ = false; }
  bool ok() const { return ok_; }
  // Every byte read and none missing: what a whole message must come to.
  bool complete() const { return ok_ && offset_ == data_.size(); }

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

// One frame: an 8-byte length, then the payload. False when the peer has gone, or sent a length
// above kMaxFrameBytes. A frame may carry one file descriptor (a connection's new SharedWindow);
// `received_fd` gets it, or -1.
bool SendFrame(int fd, const std::string& payload, int pass_fd = -1);
// Frames encoded ahead (AppendFrame) and sent later in one write (SendFrames).
void AppendFrame(std::string* frames, const std::string& payload);
bool SendFrames(int fd, const std::string& frames);
bool ReceiveFrame(int fd, std::string* payload, int* received_fd = nullptr);
// A reply on the process's side: like ReceiveFrame without a descriptor, in fewer system calls.
bool ReceiveReply(int fd, std::string* payload);

// No message comes near this (large arrays travel through the SharedWindow); a length above it
// is a peer that is not this plugin.
constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 36;

// The process at the other end of a connected Unix socket, as the kernel recorded it when the
// connection was made (not as the peer claims).
struct Peer {
  int pid = 0;
  unsigned uid = 0;
};
bool PeerOf(int fd, Peer* peer);  // false when the kernel cannot tell

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

// The daemon's abstract socket address for an instance, lock directory and engine.
std::string DaemonAddress(const std::string& instance_key);
int ConnectTo(const std::string& address);  // -1 when nobody listens
int ListenOn(const std::string& address);   // -1 when another daemon already listens

}  // namespace pjrt_neuron::engine::remote
