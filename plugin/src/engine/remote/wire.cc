// Frames on the socket (with a descriptor beside a length), the memfd window, abstract addresses.
#include "engine/remote/wire.h"

#include <cerrno>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>

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

// A message of the frame's 8-byte length with room for one descriptor beside it: the
// descriptor rides on the length's bytes, which a stream socket delivers whole.
struct LengthWithDescriptor {
  explicit LengthWithDescriptor(uint64_t* length) : part{length, sizeof(*length)} {
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
  }
  iovec part;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
};

}  // namespace

bool SendFrame(int fd, const std::string& payload, int pass_fd) {
  // Length and payload in one sendmsg: one system call, and the peer wakes once for the frame
  // instead of once for the length and again for the payload (the descriptor, if any, still
  // rides on the length's bytes: the first of the message).
  uint64_t size = payload.size();
  iovec parts[2] = {{&size, sizeof(size)}, {const_cast<char*>(payload.data()), payload.size()}};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = payload.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  // A short send (a large payload, a full socket buffer): the rest goes as plain bytes.
  size_t sent = static_cast<size_t>(n);
  if (sent < sizeof(size)) {
    return WriteAll(fd, reinterpret_cast<const char*>(&size) + sent, sizeof(size) - sent) &&
           WriteAll(fd, payload.data(), payload.size());
  }
  sent -= sizeof(size);
  return WriteAll(fd, payload.data() + sent, payload.size() - sent);
}

void AppendFrame(std::string* frames, const std::string& payload) {
  uint64_t size = payload.size();
  frames->append(reinterpret_cast<const char*>(&size), sizeof(size));
  frames->append(payload);
}

bool SendFrames(int fd, const std::string& frames) { return WriteAll(fd, frames.data(), frames.size()); }

bool ReceiveFrame(int fd, std::string* payload, int* received_fd) {
  uint64_t size = 0;
  size_t received = 0;
  if (received_fd != nullptr) {
    *received_fd = -1;
    LengthWithDescriptor length(&size);
    ssize_t n;
    do {
      n = recvmsg(fd, &length.message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    for (cmsghdr* h = CMSG_FIRSTHDR(&length.message); h != nullptr; h = CMSG_NXTHDR(&length.message, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) std::memcpy(received_fd, CMSG_DATA(h), sizeof(int));
    }
    received = static_cast<size_t>(n);
  }
  if (!ReadAll(fd, reinterpret_cast<char*>(&size) + received, sizeof(size) - received)) return false;
  if (size > kMaxFrameBytes) return false;
  // Grown as the bytes arrive: a length that the peer never follows with data costs nothing.
  constexpr size_t kStep = size_t{64} << 20;
  payload->clear();
  while (payload->size() < size) {
    size_t have = payload->size();
    size_t next = std::min<size_t>(size - have, kStep);
    payload->resize(have + next);
    if (!ReadAll(fd, payload->data() + have, next)) return false;
  }
  return true;
}

bool ReceiveReply(int fd, std::string* payload) {
  // The daemon sends nothing on a connection but the reply to its one open request, so reading
  // past the length cannot take another frame's bytes: a small reply costs one recv, not two.
  char head[4096];
  size_t have = 0;
  while (have < sizeof(uint64_t)) {
    ssize_t n = recv(fd, head + have, sizeof(head) - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    have += static_cast<size_t>(n);
  }
  uint64_t size = 0;
  std::memcpy(&size, head, sizeof(size));
  size_t body = have - sizeof(size);
  if (size > kMaxFrameBytes || body > size) return false;
  payload->assign(head + sizeof(size), body);
  constexpr size_t kStep = size_t{64} << 20;
  while (payload->size() < size) {
    size_t got = payload->size();
    size_t next = std::min<size_t>(size - got, kStep);
    payload->resize(got + next);
    if (!ReadAll(fd, payload->data() + got, next)) return false;
  }
  return true;
}

bool PeerOf(int fd, Peer* peer) {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0 || length != sizeof(credentials)) {
    return false;
  }
  peer->pid = credentials.pid;
  peer->uid = credentials.uid;
  return true;
}

bool SharedWindow::Create(size_t size) {
  Reset();
  int fd = memfd_create("pjrt-neuron-transfer", MFD_CLOEXEC);
  if (fd < 0) return false;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return false;
  }
  return Adopt(fd);
}

bool SharedWindow::Adopt(int fd) {
  Reset();
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size <= 0) {
    close(fd);
    return false;
  }
  void* data = mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    close(fd);
    return false;
  }
  fd_ = fd;
  data_ = static_cast<char*>(data);
  size_ = static_cast<size_t>(info.st_size);
  return true;
}

void SharedWindow::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
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
