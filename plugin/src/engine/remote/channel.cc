// The channel to the instance daemon (channel.h).
#include "engine/remote/channel.h"

#include <unistd.h>

#include <algorithm>

namespace pjrt_neuron::engine::remote {

Connection::~Connection() {
  if (fd >= 0) close(fd);
}

char* Connection::WindowFor(size_t size) {
  if (window.Holds(size)) return window.data();
  size_t rounded = size_t{1} << 20;
  while (rounded < size && rounded < kKeptWindowBytes) rounded <<= 1;
  if (rounded < size) rounded = (size + 4095) / 4096 * 4096;
  if (!window.Create(rounded)) return nullptr;
  window_is_new = true;
  return window.data();
}

std::string_view PlacedData(const PlacedBytes& bytes, const Connection& c) {
  if (bytes.placement == Placement::kInline) return bytes.data;
  if (c.window.data() == nullptr) return {};
  return std::string_view(c.window.data(), std::min<size_t>(static_cast<size_t>(bytes.window_bytes), c.window.size()));
}

Channel::Channel(std::string address, int primary_fd, int64_t session, std::string log_path)
    : address_(std::move(address)), primary_fd_(primary_fd), session_(session), log_path_(std::move(log_path)) {
  slot_ = RegisterSession(primary_fd);
}

Channel::~Channel() {
  idle_.clear();
  // Closing ends the session: the daemon frees what this process held.
  CloseSession(slot_, primary_fd_);
}

StatusOr<std::unique_ptr<Connection>> Channel::Lease() {
  if (InForkedChild()) {
    return FailedPrecondition("this process was forked from the one that holds the NeuronCores; "
                              "a forked child cannot use them (start it with spawn instead)");
  }
  std::unique_ptr<Connection> c = Take();
  if (c == nullptr) return Gone();
  return c;
}

StatusOr<std::string> Channel::CallOn(Connection& c, const std::string& request) {
  std::string reply;
  int pass_fd = c.window_is_new ? c.window.fd() : -1;
  std::string frames;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex_);
    frames.swap(deferred_);
    deferred_count_ = 0;
  }
  bool sent;
  if (frames.empty()) {
    sent = SendFrame(c.fd, request, pass_fd);
  } else if (pass_fd >= 0) {  // the descriptor rides on the request's own first bytes
    sent = SendFrames(c.fd, frames) && SendFrame(c.fd, request, pass_fd);
  } else {
    AppendFrame(&frames, request);
    sent = SendFrames(c.fd, frames);
  }
  if (!sent || !ReceiveReply(c.fd, &reply)) {
    close(c.fd);
    c.fd = -1;
    return Gone();
  }
  c.window_is_new = false;
  return reply;
}

void Channel::Return(std::unique_ptr<Connection> c) {
  if (c->fd < 0) return;
  // The daemon drops a window this large after its one use, as we do.
  if (!c->window_is_new && !c->window.kept()) c->window.Reset();
  Give(std::move(c));
}

Status Channel::Gone() const {
  return Unavailable("the pjrt-neuron instance daemon that holds this job's NeuronCores went away (its log: " +
                     log_path_ + ")");
}

std::unique_ptr<Connection> Channel::Take() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  int fd = ConnectTo(address_);
  if (fd < 0) return nullptr;
  auto c = std::make_unique<Connection>(fd);
  Peer peer;
  if (!PeerOf(fd, &peer) || peer.uid != geteuid()) return nullptr;
  AttachRequest attach;
  attach.session = session_;
  std::string reply;
  if (!SendFrame(fd, EncodeRequest(attach)) || !ReceiveReply(fd, &reply)) return nullptr;
  if (!DecodeReply<EmptyReply>(reply).ok()) return nullptr;
  return c;
}

void Channel::Give(std::unique_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(c));
}

}  // namespace pjrt_neuron::engine::remote
