// What the plugin does with the compatibility analysis's findings, by PJRT_NEURON_COMPAT:
// nothing, a warning once per process, or a failed compilation, for findings that change results.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/compat_analysis.h"

namespace pjrt_neuron::core {

enum class CompatMode { kOff, kWarn, kStrict };

struct CompatSettings {
  CompatMode mode = CompatMode::kWarn;
  bool strict_numerics = false;  // every int64 narrowing is logged, and in strict mode fails
  std::string report_path;       // append findings as JSON lines here, if set
};

// PJRT_NEURON_COMPAT (off|warn|strict), PJRT_NEURON_COMPAT_STRICT_NUMERICS, PJRT_NEURON_COMPAT_REPORT.
StatusOr<CompatSettings> ReadCompatSettings();

// Appends every finding to the report file; logs once per process those that can change what
// the program computes on Trainium; in strict mode turns the ones neuronx-cc would reject (and,
// with strict_numerics, every int64 narrowing) into an INVALID_ARGUMENT listing them.
// `engine` (Engine::description()) goes on every report line: which engine build compiled it.
Status ReportCompatFindings(const CompatSettings& settings, const std::string& program_name,
                            const std::vector<hlo::CompatFinding>& findings, const std::string& engine = "");

}  // namespace pjrt_neuron::core
