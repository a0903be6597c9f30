// Trainium compatibility analysis: finds, in the HLO of a program, what the Neuron compiler
// rejects or changes although XLA's CPU compiler accepts it, and points at the user's source
// line through the HLO metadata. Reporting the findings is core's (core/compat_report.h).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

struct CompatFinding {
  std::string check;        // stable identifier, e.g. "float64"
  std::string what;         // what was found, for a person
  std::string why;          // why Trainium differs
  std::string fix;          // what to do instead
  bool fails_on_trainium;   // false: it runs, but the numbers change (int64 narrowing)
  bool beyond_int32 = false;  // int64 values here can leave the int32 range, so narrowing changes results
  std::string op_name;      // framework op, from the metadata
  std::string source_file;  // the user's code, from the metadata
  int source_line = 0;
  int count = 1;            // instructions with this finding at this location
};

// `module` is a serialized HloModuleProto, or HloModuleProtoWithConfig when `with_config`.
// `from_jax` enables the checks that apply to JAX programs only.
StatusOr<std::vector<CompatFinding>> AnalyzeHloModule(const std::string& module, bool with_config, bool from_jax);
std::vector<CompatFinding> AnalyzeHloModule(const ModuleView& module, bool from_jax);

}  // namespace pjrt_neuron::hlo
