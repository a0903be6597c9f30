// Reaching this user's instance daemon, starting it first if nobody listens (daemon_spawn.h).
#include "engine/remote/daemon_spawn.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/tool_process.h"
#include "engine/remote/wire.h"

namespace pjrt_neuron::engine::remote {
namespace {

// The daemon's lock and log live in a directory of this user's own: the lock directory is
// shared by every user (as the cores are), and a file or link that another user planted there
// must not receive this user's log or decide who starts the daemon. The directory's descriptor;
// its path in `path`.
StatusOr<int> OpenPrivateDirectory(const std::string& lock_directory, std::string* path) {
  const unsigned uid = geteuid();
  *path = lock_directory + "/daemon-uid" + std::to_string(uid);
  if (mkdir(path->c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create the instance daemon's directory " + *path + ": " + std::strerror(errno));
  }
  int fd = open(path->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return Status(ErrorCode::kPermissionDenied, "the instance daemon's directory " + *path +
                                                    " is not a directory of this user (" + std::strerror(errno) +
                                                    "); remove it");
  }
  struct stat info {};
  std::string problem;
  if (fstat(fd, &info) != 0) {
    problem = std::strerror(errno);
  } else if (info.st_uid != uid) {
    problem = "it belongs to uid " + std::to_string(info.st_uid) + ", not to this user (uid " + std::to_string(uid) + ")";
  } else if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    problem = std::string("other users may enter it (mode ") + mode + ", not 0700)";
  }
  if (!problem.empty()) {
    close(fd);
    return Status(ErrorCode::kPermissionDenied, "refusing the instance daemon's directory " + *path + ": " + problem +
                                                    "; remove it");
  }
  return fd;
}

// A file of the private directory, never through a link.
StatusOr<int> OpenPrivateFile(int directory_fd, const std::string& directory, const char* name, int flags) {
  int fd = openat(directory_fd, name, flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot open " + directory + "/" + name + ": " + std::strerror(errno));
  return fd;
}

// Starts the daemon in its own session, so it outlives the process that started it.
Status SpawnDaemon(const ConnectOptions& options, const std::string& address, int log_fd) {
  const std::string library = PluginLibraryPath();
  const std::string executable = ToolProgramPath(library);
  if (access(executable.c_str(), X_OK) != 0) {
    return FailedPrecondition("the instance daemon program " + executable +
                              " is missing; reinstall pjrt-neuron or set PJRT_NEURON_INSTANCE_DAEMON");
  }
  ToolSpawn spawn;
  spawn.argv = {executable, library, address, std::to_string(options.num_cores), options.engine_library_path};
  spawn.log_fd = log_fd;
  spawn.new_session = true;
  PN_ASSIGN_OR_RETURN(pid_t pid, SpawnTool(spawn, "the instance daemon"));
  // Reaped by init after its parent, us, exits; until then a zombie at most.
  std::thread([pid] { int status; waitpid(pid, &status, 0); }).detach();
  return Status::Ok();
}

// A connection to this user's daemon; -1 when nobody listens. Another user's process at the
// address (it is a name anyone may take) is refused rather than sent this user's data.
StatusOr<int> ConnectToOwnDaemon(const std::string& address) {
  int fd = ConnectTo(address);
  if (fd < 0) return -1;
  Peer peer;
  if (PeerOf(fd, &peer) && peer.uid == geteuid()) return fd;
  close(fd);
  return Status(ErrorCode::kPermissionDenied,
                "the instance daemon's address " + address + " is held by process " + std::to_string(peer.pid) +
                    " of uid " + std::to_string(peer.uid) + ", not by a daemon of this user (uid " +
                    std::to_string(geteuid()) + "); refusing to send it this process's work");
}

}  // namespace

// Connects, starting the daemon under a lock so that one process starts it.
StatusOr<int> ConnectOrSpawn(const ConnectOptions& options, const std::string& address, std::string* log_path) {
  PN_ASSIGN_OR_RETURN(int fd, ConnectToOwnDaemon(address));
  if (fd >= 0) return fd;
  std::string directory;
  PN_ASSIGN_OR_RETURN(int directory_fd, OpenPrivateDirectory(options.lock_directory, &directory));
  *log_path = directory + "/daemon.log";
  StatusOr<int> lock_fd = OpenPrivateFile(directory_fd, directory, "daemon.lock", O_RDWR);
  if (!lock_fd.ok()) {
    close(directory_fd);
    return lock_fd.status();
  }
  flock(*lock_fd, LOCK_EX);
  StatusOr<int> connected = ConnectToOwnDaemon(address);
  Status spawned = connected.status();
  if (connected.ok() && *connected < 0) {
    StatusOr<int> log_fd = OpenPrivateFile(directory_fd, directory, "daemon.log", O_WRONLY | O_APPEND);
    spawned = log_fd.ok() ? SpawnDaemon(options, address, *log_fd) : log_fd.status();
    if (log_fd.ok()) close(*log_fd);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (spawned.ok() && *connected < 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      connected = ConnectToOwnDaemon(address);
      if (!connected.ok()) spawned = connected.status();
    }
  }
  flock(*lock_fd, LOCK_UN);
  close(*lock_fd);
  close(directory_fd);
  PN_RETURN_IF_ERROR(spawned);
  if (*connected < 0) return Unavailable("the instance daemon did not start within 120 s; see " + *log_path);
  return *connected;
}

}  // namespace pjrt_neuron::engine::remote
