// Runs the StableHLO to HLO converter (mlir_to_hlo.h).
#include "engine/neuron/mlir_to_hlo.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "common/tool_process.h"
#include "engine/neuron/scratch_dir.h"
#include "engine/neuron/subprocess.h"

namespace pjrt_neuron::engine::neuron {
namespace {

constexpr int kExitNoBindings = 3;
constexpr int kExitBadProgram = 4;  // not 1: Python exits 1 on any uncaught error
constexpr char kModule[] = "pjrt_neuron._neuron_mlir_to_hlo";

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A framework process is a Python process: its interpreter has the framework's jaxlib.
std::string ThisPython() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n > 0) {
    std::string self(buffer, static_cast<size_t>(n));
    if (Basename(self).compare(0, 6, "python") == 0) return self;
  }
  return "python3";
}

// The directory that holds the pjrt_neuron package, when this library was installed in it.
std::string PackageParent() {
  const std::string library = PluginLibraryPath();
  if (library.empty()) return "";
  const std::string package = Dirname(library);
  struct stat st;
  if (Basename(package) != "pjrt_neuron" || stat((package + "/_neuron_mlir_to_hlo.py").c_str(), &st) != 0) return "";
  return Dirname(package);
}

std::string LastLines(const std::string& text, size_t max_chars) {
  std::string trimmed = text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
  return trimmed.size() <= max_chars ? trimmed : "..." + trimmed.substr(trimmed.size() - max_chars);
}

}  // namespace

StatusOr<MlirConverter> DefaultMlirConverter() {
  MlirConverter converter;
  // The converter must not load this plugin again: it would claim the NeuronCores.
  converter.environment.emplace_back("JAX_PLATFORMS", "cpu");
  const char* setting = std::getenv("PJRT_NEURON_MLIR_CONVERTER");
  if (setting != nullptr && *setting != '\0') {
    auto words = SplitShellWords(setting);
    if (!words.ok()) return InvalidArgument("PJRT_NEURON_MLIR_CONVERTER: " + words.status().message());
    if (words->empty()) return InvalidArgument("PJRT_NEURON_MLIR_CONVERTER is blank");
    converter.command = std::move(words.value());
    return converter;
  }
  converter.command = {ThisPython(), "-m", kModule};
  if (std::string parent = PackageParent(); !parent.empty()) {
    const char* path = std::getenv("PYTHONPATH");
    converter.environment.emplace_back("PYTHONPATH", parent + (path != nullptr && *path ? ":" + std::string(path) : ""));
  }
  return converter;
}

StatusOr<std::string> ConvertMlirToHlo(const MlirConverter& converter, const std::string& program) {
  PN_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Create("pjrt-neuron-mlir-"));
  const std::string input = scratch.path() + "/program.mlir.bc";
  const std::string output = scratch.path() + "/program.hlo_module.pb";
  PN_RETURN_IF_ERROR(WriteFile(input, program));
  SubprocessOptions options;
  options.argv = converter.command;
  options.argv.push_back(input);
  options.argv.push_back(output);
  options.environment = converter.environment;
  auto run = RunSubprocess(options);
  std::string command_text;
  for (const std::string& word : converter.command) command_text += (command_text.empty() ? "" : " ") + word;
  if (!run.ok()) {
    return FailedPrecondition("the StableHLO converter (" + command_text + ") cannot run: " + run.status().message() +
                              "; set PJRT_NEURON_MLIR_CONVERTER");
  }
  if (run->cancelled) return Status(ErrorCode::kCancelled, "the StableHLO conversion was cancelled");
  if (run->signal == 0 && run->exit_code == 0) {
    auto module = ReadFile(output);
    if (module.ok() && !module->empty()) return std::move(module.value());
    return Internal("the StableHLO converter (" + command_text + ") wrote no HLO module");
  }
  const std::string said = LastLines(run->output, 2000);
  if (run->signal == 0 && run->exit_code == kExitBadProgram) return InvalidArgument(said);
  return FailedPrecondition("the StableHLO converter (" + command_text + ") failed (" +
                            (run->signal != 0 ? "signal " + std::to_string(run->signal)
                                              : "exit code " + std::to_string(run->exit_code)) +
                            "): " + said +
                            (run->exit_code == kExitNoBindings ? "" : "; is JAX installed for that Python?"));
}

}  // namespace pjrt_neuron::engine::neuron
