// The socket channel to the instance daemon: a small pool of connections of one session, each
// with the shared memory window its bulk transfers use. Every remote call is a request on one.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/remote/protocol.h"
#include "engine/remote/sessions.h"

namespace pjrt_neuron::engine::remote {

// One socket to the daemon, with the shared memory its transfers use.
struct Connection {
  explicit Connection(int fd) : fd(fd) {}
  ~Connection();
  int fd;
  SharedWindow window;
  bool window_is_new = false;  // the daemon has not been given it yet

  // The window with room for `size` bytes, or nullptr: then the bytes go inline in the message.
  char* WindowFor(size_t size);
};

// A reply's bulk bytes: inline in the message, or in the connection's window.
std::string_view PlacedData(const PlacedBytes& bytes, const Connection& c);

// Where the daemon is to put the bytes of a reply: the window, when there is one.
inline Placement PlacementOf(const char* window) { return window != nullptr ? Placement::kWindow : Placement::kInline; }

class Channel {
 public:
  Channel(std::string address, int primary_fd, int64_t session, std::string log_path);
  ~Channel();

  // Sends a request that gets no reply (IsOneWay).
  template <typename Request>
  void Send(const Request& request) {
    if (InForkedChild()) return;
    std::unique_ptr<Connection> c = Take();
    if (c == nullptr) return;
    if (SendFrame(c->fd, EncodeRequest(request))) Give(std::move(c));
  }

  // Sends a one-way request with the next call instead of on its own: the daemon then wakes
  // once per call, not once more for each buffer released before it. At most kMaxDeferred
  // wait; the caller defers only small releases, so little daemon memory waits with them.
  template <typename Request>
  void Defer(const Request& request) {
    if (InForkedChild()) return;
    std::string due;
    {
      std::lock_guard<std::mutex> lock(deferred_mutex_);
      AppendFrame(&deferred_, EncodeRequest(request));
      if (++deferred_count_ < kMaxDeferred) return;
      due.swap(deferred_);
      deferred_count_ = 0;
    }
    std::unique_ptr<Connection> c = Take();
    if (c != nullptr && SendFrames(c->fd, due)) Give(std::move(c));
  }
  static constexpr int kMaxDeferred = 64;

  // Sends a request and decodes its reply (which must hold no views: its bytes are gone).
  template <typename Reply, typename Request>
  StatusOr<Reply> Call(const Request& request) {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Lease());
    auto reply = CallOn(*c, EncodeRequest(request));
    Return(std::move(c));
    PN_RETURN_IF_ERROR(reply.status());
    return DecodeReply<Reply>(*reply);
  }

  // A connection for a call whose bulk bytes use its window; hand it back with Return.
  StatusOr<std::unique_ptr<Connection>> Lease();

  // The reply's bytes, status and all: DecodeReply reads them.
  StatusOr<std::string> CallOn(Connection& c, const std::string& request);

  void Return(std::unique_ptr<Connection> c);

 private:
  Status Gone() const;
  std::unique_ptr<Connection> Take();
  void Give(std::unique_ptr<Connection> c);

  std::string address_;
  int primary_fd_;
  int64_t session_;
  std::string log_path_;
  int slot_ = -1;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::mutex deferred_mutex_;
  std::string deferred_;  // encoded one-way frames, sent before the next call's request
  int deferred_count_ = 0;
};

}  // namespace pjrt_neuron::engine::remote
