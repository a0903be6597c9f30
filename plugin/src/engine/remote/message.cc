#include "engine/remote/message.h"

#include <cerrno>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/sha256.h"

namespace pjrt_neuron::engine::remote {
namespace {

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

sockaddr_un AbstractAddress(const std::string& address, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: no file to clean up after a crash.
  addr.sun_path[0] = '\0';
  std::memcpy(addr.sun_path + 1, address.data(), address.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + address.size());
  return addr;
}

}  // namespace

bool SendFrame(int fd, const std::string& payload) {
  uint64_t size = payload.size();
  return WriteAll(fd, reinterpret_cast<const char*>(&size), sizeof(size)) &&
         WriteAll(fd, payload.data(), payload.size());
}

bool ReceiveFrame(int fd, std::string* payload) {
  uint64_t size = 0;
  if (!ReadAll(fd, reinterpret_cast<char*>(&size), sizeof(size))) return false;
  if (size > (uint64_t{1} << 40)) return false;
  payload->resize(size);
  return ReadAll(fd, payload->data(), size);
}

std::string DaemonAddress(const std::string& instance_key) {
  Sha256 hash;
  hash.Update(instance_key);
  return "pjrt-neuron-instance-" + Sha256::Hex(hash.Digest()).substr(0, 24);
}

int ConnectTo(const std::string& address) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t length = 0;
  sockaddr_un addr = AbstractAddress(address, &length);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int ListenOn(const std::string& address) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t length = 0;
  sockaddr_un addr = AbstractAddress(address, &length);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 || listen(fd, 128) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace pjrt_neuron::engine::remote
