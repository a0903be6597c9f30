// The stand-in's global communicator for collectives whose ranks live in several processes.
// The process that loads rank 0 listens on NEURON_RT_ROOT_COMM_ID; every other process's ranks
// connect there. The root runs each round of a group's program for all ranks at once: remote
// ranks send their inputs and get their outputs back over the connection. (How the real
// runtime moves the data is not in the contract; only who meets whom is.)
#ifndef NEURON_STANDIN_COMMUNICATOR_H_
#define NEURON_STANDIN_COMMUNICATOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace standin {

enum FrameKind : uint32_t {
  kFrameJoin = 1,     // remote -> root: u32 rank, u32 world, NEFF bytes
  kFrameExecute = 2,  // remote -> root: the inputs' bytes, in NEFF input order
  kFrameReply = 3,    // root -> remote: u32 status, message, then the outputs' bytes
};

// A little-endian, length-prefixed byte stream.
class FrameWriter {
 public:
  FrameWriter& U32(uint32_t value);
  FrameWriter& Bytes(const void* data, size_t size);  // u64 size, then the bytes
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

class FrameReader {
 public:
  explicit FrameReader(const std::string& data) : data_(data) {}
  bool U32(uint32_t* value);
  bool Bytes(const char** data, size_t* size);  // points into the frame

 private:
  const std::string& data_;
  size_t at_ = 0;
};

bool SendFrame(int fd, uint32_t kind, const std::string& payload);
// False on a closed connection, a malformed frame or `timeout_seconds` without one (< 0: none).
bool ReceiveFrame(int fd, uint32_t* kind, std::string* payload, double timeout_seconds);

// host:port -> a listening socket, or -1 with `error`.
int ListenOn(const std::string& root_comm_id, std::string* error);
// One attempt to connect; -1 with `error` when nobody listens there (yet).
int ConnectTo(const std::string& root_comm_id, std::string* error);

}  // namespace standin

#endif  // NEURON_STANDIN_COMMUNICATOR_H_
