// Trainium compatibility analysis: finds, in the HLO of each compiled program, what the
// Neuron compiler rejects or changes although XLA's CPU compiler accepts it, and points at
// the user's source line through the HLO metadata.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

struct CompatFinding {
  std::string check;        // stable identifier, e.g. "float64"
  std::string what;         // what was found, for a person
  std::string why;          // why Trainium differs
  std::string fix;          // what to do instead
  bool fails_on_trainium;   // false: it runs, but the numbers change (int64 narrowing)
  std::string op_name;      // framework op, from the metadata
  std::string source_file;  // the user's code, from the metadata
  int source_line = 0;
  int count = 1;            // instructions with this finding at this location
};

enum class CompatMode { kOff, kWarn, kStrict };

struct CompatSettings {
  CompatMode mode = CompatMode::kWarn;
  bool strict_numerics = false;  // numeric changes fail too in strict mode
  std::string report_path;       // append findings as JSON lines here, if set
};

// PJRT_NEURON_COMPAT (off|warn|strict), PJRT_NEURON_COMPAT_STRICT_NUMERICS, PJRT_NEURON_COMPAT_REPORT.
StatusOr<CompatSettings> ReadCompatSettings();

// `module` is a serialized HloModuleProto, or HloModuleProtoWithConfig when `with_config`.
// `from_jax` enables the checks that apply to JAX programs only.
StatusOr<std::vector<CompatFinding>> AnalyzeHloModule(const std::string& module, bool with_config, bool from_jax);

// Logs new findings once per process, appends them to the report file, and in strict mode
// turns the ones that would fail on Trainium into an INVALID_ARGUMENT listing them.
Status ReportCompatFindings(const CompatSettings& settings, const std::string& program_name,
                            const std::vector<CompatFinding>& findings);

}  // namespace pjrt_neuron::core
