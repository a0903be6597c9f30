// Frames and sockets of the stand-in's global communicator (communicator.h).
#include "communicator.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace standin {
namespace {

constexpr uint64_t kLargestFrame = uint64_t{1} << 36;

bool SplitHostPort(const std::string& id, std::string* host, std::string* port) {
  size_t colon = id.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == id.size()) return false;
  *host = id.substr(0, colon);
  *port = id.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return true;
}

addrinfo* Resolve(const std::string& id, bool passive, std::string* error) {
  std::string host, port;
  if (!SplitHostPort(id, &host, &port)) {
    *error = "'" + id + "' is not host:port";
    return nullptr;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = "cannot resolve '" + id + "': " + gai_strerror(rc);
    return nullptr;
  }
  return found;
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t size, std::chrono::steady_clock::time_point deadline, bool bounded) {
  while (size > 0) {
    if (bounded) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return false;
    }
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

FrameWriter& FrameWriter::U32(uint32_t value) {
  for (int i = 0; i < 4; ++i) data_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return *this;
}

FrameWriter& FrameWriter::Bytes(const void* data, size_t size) {
  const uint64_t length = size;
  for (int i = 0; i < 8; ++i) data_.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  if (size > 0) data_.append(static_cast<const char*>(data), size);
  return *this;
}

bool FrameReader::U32(uint32_t* value) {
  if (data_.size() - at_ < 4) return false;
  *value = 0;
  for (int i = 0; i < 4; ++i) *value |= static_cast<uint32_t>(static_cast<uint8_t>(data_[at_ + i])) << (8 * i);
  at_ += 4;
  return true;
}

bool FrameReader::Bytes(const char** data, size_t* size) {
  if (data_.size() - at_ < 8) return false;
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<uint8_t>(data_[at_ + i])) << (8 * i);
  at_ += 8;
  if (data_.size() - at_ < length) return false;
  *data = data_.data() + at_;
  *size = static_cast<size_t>(length);
  at_ += static_cast<size_t>(length);
  return true;
}

bool SendFrame(int fd, uint32_t kind, const std::string& payload) {
  char header[12];
  const uint64_t length = payload.size();
  for (int i = 0; i < 4; ++i) header[i] = static_cast<char>((kind >> (8 * i)) & 0xFF);
  for (int i = 0; i < 8; ++i) header[4 + i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return WriteAll(fd, header, sizeof header) && WriteAll(fd, payload.data(), payload.size());
}

bool ReceiveFrame(int fd, uint32_t* kind, std::string* payload, double timeout_seconds) {
  const bool bounded = timeout_seconds >= 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>((bounded ? timeout_seconds : 0) * 1000));
  unsigned char header[12];
  if (!ReadAll(fd, reinterpret_cast<char*>(header), sizeof header, deadline, bounded)) return false;
  *kind = 0;
  uint64_t length = 0;
  for (int i = 0; i < 4; ++i) *kind |= static_cast<uint32_t>(header[i]) << (8 * i);
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(header[4 + i]) << (8 * i);
  if (length > kLargestFrame) return false;
  payload->resize(static_cast<size_t>(length));
  return ReadAll(fd, payload->data(), payload->size(), deadline, bounded);
}

int ListenOn(const std::string& root_comm_id, std::string* error) {
  addrinfo* found = Resolve(root_comm_id, true, error);
  if (!found) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      *error = "cannot listen on " + root_comm_id + ": " + std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

int ConnectTo(const std::string& root_comm_id, std::string* error) {
  addrinfo* found = Resolve(root_comm_id, false, error);
  if (!found) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *error = "nobody listens on " + root_comm_id + ": " + std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd >= 0) {
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  return fd;
}

}  // namespace standin
