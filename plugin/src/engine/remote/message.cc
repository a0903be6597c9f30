#include "engine/remote/message.h"

#include <cerrno>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

bool SendFrame(int fd, const std::string& payload, int pass_fd) {
  uint64_t size = payload.size();
  if (pass_fd < 0) return WriteAll(fd, reinterpret_cast<const char*>(&size), sizeof(size)) &&
                          WriteAll(fd, payload.data(), payload.size());
  // The descriptor rides on the length's bytes, which a stream socket delivers whole.
  iovec part{&size, sizeof(size)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &pass_fd, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(fd, &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  return WriteAll(fd, reinterpret_cast<const char*>(&size) + n, sizeof(size) - n) &&
         WriteAll(fd, payload.data(), payload.size());
}

bool ReceiveFrame(int fd, std::string* payload, int* received_fd) {
  uint64_t size = 0;
  if (received_fd == nullptr) {
    if (!ReadAll(fd, reinterpret_cast<char*>(&size), sizeof(size))) return false;
  } else {
    *received_fd = -1;
    iovec part{&size, sizeof(size)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    ssize_t n;
    do {
      n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return false;
    for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h)) {
      if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) std::memcpy(received_fd, CMSG_DATA(h), sizeof(int));
    }
    if (!ReadAll(fd, reinterpret_cast<char*>(&size) + n, sizeof(size) - n)) return false;
  }
  if (size > (uint64_t{1} << 40)) return false;
  payload->resize(size);
  return ReadAll(fd, payload->data(), size);
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
