// What the plugin does with the compatibility analysis's findings, by PJRT_NEURON_COMPAT:
// nothing, a warning once per process, or a failed compilation.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/compat_analysis.h"

namespace pjrt_neuron::core {

enum class CompatMode { kOff, kWarn, kStrict };

struct CompatSettings {
  CompatMode mode = CompatMode::kWarn;
  bool strict_numerics = false;  // numeric changes fail too in strict mode
  std::string report_path;       // append findings as JSON lines here, if set
};

// PJRT_NEURON_COMPAT (off|warn|strict), PJRT_NEURON_COMPAT_STRICT_NUMERICS, PJRT_NEURON_COMPAT_REPORT.
StatusOr<CompatSettings> ReadCompatSettings();

// Logs new findings once per process, appends them to the report file, and in strict mode
// turns the ones that would fail on Trainium into an INVALID_ARGUMENT listing them.
Status ReportCompatFindings(const CompatSettings& settings, const std::string& program_name,
                            const std::vector<hlo::CompatFinding>& findings);

}  // namespace pjrt_neuron::core
