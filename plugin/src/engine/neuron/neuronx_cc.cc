// neuronx-cc's command line, output and failures (neuronx_cc.h).
#include "engine/neuron/neuronx_cc.h"

#include <signal.h>

#include <cctype>
#include <cstdio>
#include <cstring>

#include "engine/neuron/scratch_dir.h"
#include "engine/neuron/subprocess.h"

namespace pjrt_neuron::engine::neuron {
namespace {

constexpr size_t kMaxErrorLinesInMessage = 8;

bool IsHbmCode(const std::string& code) { return code == "NCC_EOOM001" || code == "NCC_EVRF009"; }

std::string Trimmed(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// "ERROR" as a word: "... ERROR 1234 [neuronx-cc]: ...", "ERROR: ...", "[ERROR] ...".
bool HasErrorMarker(const std::string& line) {
  for (size_t at = line.find("ERROR"); at != std::string::npos; at = line.find("ERROR", at + 1)) {
    const bool starts = at == 0 || (!std::isalnum(static_cast<unsigned char>(line[at - 1])) && line[at - 1] != '_');
    const size_t after = at + 5;
    const bool ends = after >= line.size() || (!std::isalnum(static_cast<unsigned char>(line[after])) && line[after] != '_');
    if (starts && ends) return true;
  }
  return false;
}

}  // namespace

std::string TargetFor(uint32_t instance_family, const std::string& instance_type) {
  switch (instance_family) {
    case 2: return "trn1";
    case 3: return "trn1n";
    case 4: return "inf2";
    case 5: return "trn2";
    default: break;
  }
  for (const char* target : {"trn1n", "trn1", "trn2", "inf2"}) {
    const std::string prefix = std::string(target) + ".";
    if (instance_type.compare(0, prefix.size(), prefix) == 0) return target;
  }
  return "";
}

int DefaultLnc(const std::string& target) { return target == "trn2" ? 2 : 1; }

std::vector<std::string> CompileCommand(const CompilerConfig& config, const std::string& input,
                                        const std::string& output) {
  std::vector<std::string> command = {config.path, "compile", input, "--framework=XLA", "--target=" + config.target,
                                      "--lnc", std::to_string(config.lnc), "--output", output};
  command.insert(command.end(), config.extra_flags.begin(), config.extra_flags.end());
  return command;
}

StatusOr<std::string> CompilerVersion(const std::string& path) {
  SubprocessOptions options;
  options.argv = {path, "--version"};
  auto run = RunSubprocess(options);
  if (!run.ok()) return FailedPrecondition("neuronx-cc ('" + path + "') cannot be run: " + run.status().message());
  if (run->signal != 0 || run->exit_code != 0) {
    return FailedPrecondition("'" + path + " --version' failed (" +
                              (run->signal != 0 ? "signal " + std::to_string(run->signal)
                                                : "exit code " + std::to_string(run->exit_code)) +
                              "): " + Trimmed(run->output).substr(0, 400));
  }
  // The last non-empty line: wrappers may print warnings first.
  std::string version;
  size_t start = 0;
  const std::string& out = run->output;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = Trimmed(out.substr(start, end - start));
    if (!line.empty()) version = line;
    start = end + 1;
  }
  if (version.empty()) return FailedPrecondition("'" + path + " --version' printed nothing");
  return version;
}

CompilerDiagnostics ParseCompilerOutput(const std::string& output) {
  CompilerDiagnostics diagnostics;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    const std::string line = Trimmed(output.substr(start, end - start));
    start = end + 1;
    if (line.find("Compiler status PASS") != std::string::npos) diagnostics.passed = true;
    if (HasErrorMarker(line)) diagnostics.error_lines.push_back(line);
    for (size_t at = line.find("NCC_"); at != std::string::npos; at = line.find("NCC_", at + 4)) {
      size_t stop = at + 4;
      while (stop < line.size() && std::isalnum(static_cast<unsigned char>(line[stop]))) ++stop;
      if (stop == at + 4) continue;
      std::string code = line.substr(at, stop - at);
      bool seen = false;
      for (const std::string& c : diagnostics.codes) seen |= c == code;
      if (!seen) diagnostics.codes.push_back(code);
    }
  }
  return diagnostics;
}

Status CompileFailure(const CompileExit& exit, const CompilerDiagnostics& diagnostics, const std::string& program,
                      const std::string& log_path) {
  if (exit.cancelled) return Status(ErrorCode::kCancelled, "the neuronx-cc compile of '" + program + "' was cancelled");
  std::string how = exit.signal != 0 ? "was killed by signal " + std::to_string(exit.signal) +
                                           (exit.signal == SIGKILL ? " (SIGKILL: most often the host's OOM killer)" : "")
                                     : "failed with exit code " + std::to_string(exit.exit_code);
  std::string message = "neuronx-cc " + how + " compiling '" + program + "'";
  if (!diagnostics.codes.empty()) {
    message += " [";
    for (size_t i = 0; i < diagnostics.codes.size(); ++i) message += (i == 0 ? "" : ", ") + diagnostics.codes[i];
    message += "]";
  }
  if (!diagnostics.error_lines.empty()) {
    message += ":";
    const size_t shown = std::min(diagnostics.error_lines.size(), kMaxErrorLinesInMessage);
    for (size_t i = 0; i < shown; ++i) message += "\n  " + diagnostics.error_lines[i];
    if (shown < diagnostics.error_lines.size()) {
      message += "\n  (" + std::to_string(diagnostics.error_lines.size() - shown) + " more ERROR lines)";
    }
  }
  message += "\nfull log: " + log_path;
  bool hbm = false;
  for (const std::string& code : diagnostics.codes) hbm |= IsHbmCode(code);
  if (hbm) return Status(ErrorCode::kResourceExhausted, message + "\n(the program does not fit in a NeuronCore's HBM)");
  if (exit.signal == SIGKILL) return Status(ErrorCode::kResourceExhausted, message);
  if (exit.signal != 0) return Internal(message);
  return InvalidArgument(message);
}

StatusOr<std::string> CompileToNeff(const CompilerConfig& config, const std::string& hlo_module,
                                    const std::string& program) {
  PN_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Create("pjrt-neuron-neuronx-cc-"));
  const std::string input = scratch.path() + "/model.hlo_module.pb";
  const std::string neff = scratch.path() + "/model.neff";
  const std::string log = scratch.path() + "/neuronx-cc.log";
  PN_RETURN_IF_ERROR(WriteFile(input, hlo_module));
  SubprocessOptions options;
  options.argv = CompileCommand(config, input, neff);
  options.working_directory = scratch.path();  // the compiler writes its work files beside its input
  options.output_path = log;
  options.progress_after_seconds = config.progress_after_seconds;
  options.on_progress = [&](double elapsed) {
    std::fprintf(stderr, "pjrt-neuron: neuronx-cc is compiling '%s' for %s: %.0f s so far (Ctrl-C cancels)\n",
                 program.c_str(), config.target.c_str(), elapsed);
  };
  PN_ASSIGN_OR_RETURN(SubprocessResult run, RunSubprocess(options));
  const CompileExit exit{run.exit_code, run.signal, run.cancelled};
  if (run.cancelled || run.signal != 0 || run.exit_code != 0) {
    scratch.Keep();
    return CompileFailure(exit, ParseCompilerOutput(run.output), program, log);
  }
  auto bytes = ReadFile(neff);
  if (!bytes.ok() || bytes->empty()) {
    scratch.Keep();
    return Internal("neuronx-cc reported success compiling '" + program + "' but wrote no NEFF at " + neff +
                    "\nfull log: " + log);
  }
  return std::move(bytes.value());
}

}  // namespace pjrt_neuron::engine::neuron
