// Finds and starts the plugin's tool program (tool_process.h).
#include "common/tool_process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>

#include <cstring>

#include "common/settings.h"

extern char** environ;

namespace pjrt_neuron {

std::string PluginLibraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PluginLibraryPath), &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::string ToolProgramPath(const std::string& library) {
  if (auto set = settings::Raw(settings::Id::kInstanceDaemon)) return *set;
  return library.substr(0, library.rfind('/') + 1) + "pjrt-neuron-instanced";
}

StatusOr<pid_t> SpawnTool(const ToolSpawn& spawn, const std::string& what) {
  std::vector<std::string> argv_text = spawn.argv;
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, spawn.log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, spawn.log_fd, 2);
  if (spawn.pass_fd >= 0) posix_spawn_file_actions_adddup2(&actions, spawn.pass_fd, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (spawn.new_session) posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv_text[0].c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) return Internal("could not start " + what + " " + argv_text[0] + ": " + std::strerror(error));
  return pid;
}

}  // namespace pjrt_neuron
