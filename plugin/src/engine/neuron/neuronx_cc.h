// neuronx-cc as a subprocess: its command line, its version, its target for an instance, and
// what its output says when it fails (ERROR lines, NCC_ codes) as a PJRT status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

struct CompilerConfig {
  std::string path;     // the neuronx-cc executable
  std::string version;  // as `neuronx-cc --version` prints it
  std::string target;   // trn1, trn1n, trn2 or inf2
  int lnc = 1;          // logical NeuronCore config, the same as the runtime's
  std::vector<std::string> extra_flags;  // NEURON_CC_FLAGS, split like a shell
  double progress_after_seconds = 5;
};

// The --target for an instance family (nrt_get_instance_info) or, when that is 0, an instance
// type name ("trn1.32xlarge"); empty when neither says.
std::string TargetFor(uint32_t instance_family, const std::string& instance_type);
// NEURON_LOGICAL_NC_CONFIG's default for a target: 2 on trn2, else 1.
int DefaultLnc(const std::string& target);

// neuronx-cc compile <input> --framework=XLA --target=T --lnc N --output <neff> [flags...]
std::vector<std::string> CompileCommand(const CompilerConfig& config, const std::string& input,
                                        const std::string& output);

// Runs `neuronx-cc --version`; FAILED_PRECONDITION naming the path when it does not run.
StatusOr<std::string> CompilerVersion(const std::string& path);

struct CompilerDiagnostics {
  std::vector<std::string> error_lines;  // lines with an ERROR marker, in order
  std::vector<std::string> codes;        // NCC_ codes, each once, in order
  bool passed = false;                   // "Compiler status PASS" was printed
};
CompilerDiagnostics ParseCompilerOutput(const std::string& output);

// How a compile ended.
struct CompileExit {
  int exit_code = 0;
  int signal = 0;
  bool cancelled = false;
};

// The status of a failed compile of `program`: INVALID_ARGUMENT with the ERROR lines, the codes
// and the log's path; RESOURCE_EXHAUSTED for HBM codes (and a kill by SIGKILL, which is most
// often the host's OOM killer); INTERNAL for a crash; CANCELLED when we ended it.
Status CompileFailure(const CompileExit& exit, const CompilerDiagnostics& diagnostics, const std::string& program,
                      const std::string& log_path);

// Compiles a serialized HloModuleProto into a NEFF. `program` names it in progress lines and
// messages. The files stay in a directory under $TMPDIR when the compile fails.
StatusOr<std::string> CompileToNeff(const CompilerConfig& config, const std::string& hlo_module,
                                    const std::string& program);

}  // namespace pjrt_neuron::engine::neuron
