// The instance daemon's process: one per simulated instance, owning every NeuronCore's engine
// as the Neuron driver owns the real cores, so a collective program of a multi-process job
// runs inside one engine client, on XLA's own collective implementation. This file listens,
// serves each connection on a thread of its own, and exits once no process has used it for a
// while; worlds.h, dispatch.h and gang_scheduler.h do the rest.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "daemon/daemon.h"
#include "daemon/dispatch.h"
#include "daemon/gang_scheduler.h"
#include "daemon/worlds.h"
#include "engine/engine.h"
#include "engine/remote/protocol.h"
#include "engine/sim/sim_engine.h"

namespace pjrt_neuron::daemon {
namespace {

using namespace engine::remote;
using Clock = std::chrono::steady_clock;

class Server {
 public:
  Server(std::unique_ptr<engine::Engine> engine, int listen_fd, const DaemonOptions& options)
      : engine_(std::move(engine)),
        listen_fd_(listen_fd),
        idle_seconds_(options.idle_seconds),
        gangs_([this](int job, int core) { return worlds_.HoldsCore(job, core); }),
        worlds_(gangs_),
        dispatcher_(*engine_, gangs_, options.trace) {}

  int Run() {
    auto idle_since = Clock::now();
    while (true) {
      pollfd p{listen_fd_, POLLIN, 0};
      int ready = poll(&p, 1, 500);
      if (ready > 0) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0 && !FromOwner(fd)) {
          close(fd);
        } else if (fd >= 0) {
          std::lock_guard<std::mutex> lock(mutex_);
          ++connections_;
          std::thread([this, fd] { Serve(fd); }).detach();
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (connections_ > 0) {
        idle_since = Clock::now();
      } else if (std::chrono::duration<double>(Clock::now() - idle_since).count() > idle_seconds_) {
        // Stop listening before leaving, so a process that arrives now starts a new daemon.
        close(listen_fd_);
        return 0;
      }
    }
  }

 private:
  // The first message of a connection: a hello makes a session (the connection is its primary
  // one, whose end ends it), an attach joins one. The reply to send, and the session to serve.
  std::string Open(const std::string& request, std::shared_ptr<Session>* session, bool* serve, bool* primary) {
    switch (RequestOp(request)) {
      case Op::kHello: {
        *primary = true;
        HelloRequest hello;
        if (Status decoded = DecodeRequest(request, &hello); !decoded.ok()) return EncodeReply(decoded);
        Worlds::Joined joined = worlds_.Hello(hello);
        *session = joined.session;
        if (!joined.status.ok()) return EncodeReply(joined.status);  // its connection closes and ends the session
        *serve = true;
        HelloReply reply;
        reply.description = engine_->description();
        reply.num_cores = engine_->num_cores();
        reply.session = joined.session->id;
        reply.world = std::move(joined.world);
        return EncodeReply(reply);
      }
      case Op::kAttach: {
        AttachRequest attach;
        if (Status decoded = DecodeRequest(request, &attach); !decoded.ok()) return EncodeReply(decoded);
        auto attached = worlds_.Attach(attach.session);
        if (!attached.ok()) return EncodeReply(attached.status());
        *session = attached.value();
        *serve = true;
        return EncodeReply(EmptyReply{});
      }
      default: return EncodeReply(InvalidArgument("the first message must be hello or attach"));
    }
  }

  // An abstract socket has no file permissions: anyone in this network namespace can connect.
  // Only the daemon's own user may see its buffers or run programs on its cores.
  static bool FromOwner(int fd) {
    Peer peer;
    if (!PeerOf(fd, &peer)) {
      std::fprintf(stderr, "pjrt-neuron instance daemon: refused a connection whose user the kernel cannot tell\n");
      return false;
    }
    if (peer.uid == geteuid()) return true;
    std::fprintf(stderr,
                 "pjrt-neuron instance daemon: refused a connection from process %d of uid %u: this daemon serves "
                 "uid %u only\n",
                 peer.pid, peer.uid, static_cast<unsigned>(geteuid()));
    return false;
  }

  void Serve(int fd) {
    try {
      ServeConnection(fd);
    } catch (const std::exception& e) {
      // One connection's failure (say, memory for a huge request) must not end the others.
      std::fprintf(stderr, "pjrt-neuron instance daemon: closed a connection: %s\n", e.what());
    }
    close(fd);
    std::lock_guard<std::mutex> lock(mutex_);
    --connections_;
  }

  void ServeConnection(int fd) {
    std::string request;
    std::shared_ptr<Session> session;
    bool primary = false;
    // The primary connection's end ends its session, however the connection ended.
    struct EndsSession {
      Worlds& worlds;
      const std::shared_ptr<Session>& session;
      const bool& primary;
      ~EndsSession() {
        if (primary && session != nullptr) worlds.EndSession(session);
      }
    } ends_session{worlds_, session, primary};
    if (ReceiveFrame(fd, &request)) {
      bool serve = false;
      std::string reply = Open(request, &session, &serve, &primary);
      serve = SendFrame(fd, reply) && serve;
      SharedWindow window;
      int window_fd = -1;
      while (serve && ReceiveFrame(fd, &request, &window_fd)) {
        if (window_fd >= 0) window.Adopt(window_fd);
        std::string out = dispatcher_.Handle(*session, request, window);
        if (!window.kept()) window.Reset();  // used once, as the process does
        if (IsOneWay(RequestOp(request))) continue;
        if (!SendFrame(fd, out)) break;
      }
    }
  }

  std::unique_ptr<engine::Engine> engine_;
  const int listen_fd_;
  const double idle_seconds_;
  // Locked in this order when both are: the scheduler asks the worlds who holds a core.
  GangScheduler gangs_;
  Worlds worlds_;
  Dispatcher dispatcher_;
  std::mutex mutex_;  // of connections_
  int connections_ = 0;
};

}  // namespace

int ServeInstance(const DaemonOptions& options) {
  signal(SIGPIPE, SIG_IGN);
  engine::EngineOptions engine_options;
  engine_options.num_cores = options.num_cores;
  engine_options.library_path = options.engine_library_path;
  auto engine = engine::CreateSimEngine(engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "pjrt-neuron instance daemon: %s\n", engine.status().message().c_str());
    return 1;
  }
  int fd = ListenOn(options.address);
  if (fd < 0) {
    std::fprintf(stderr, "pjrt-neuron instance daemon: another daemon already serves this instance\n");
    return 0;
  }
  std::fprintf(stderr, "pjrt-neuron instance daemon: serving %d NeuronCores (pid %d)\n", options.num_cores, getpid());
  Server server(std::move(engine.value()), fd, options);
  return server.Run();
}

}  // namespace pjrt_neuron::daemon
