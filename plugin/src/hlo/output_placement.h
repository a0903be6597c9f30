// JAX marks a program's outputs that belong in host memory (out_shardings with memory_kind
// "pinned_host") with annotate_device_placement custom calls and a host memory space (S(5)) in
// the entry layout. XLA's CPU engine in the simulator lowers neither, so the annotations are
// taken out of the program here and the outputs' memory kinds handed back: the engine runs the
// plain program and the caller moves those outputs to host memory.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

struct PlacedOutputs {
  std::string module;                        // a serialized HloModuleProto without the annotations
  std::vector<std::string> output_memory_kinds;  // per flattened output; "" where not annotated
};

inline constexpr char kAnnotateDevicePlacement[] = "annotate_device_placement";

// `module`: a serialized HloModuleProto. INVALID_ARGUMENT when it cannot be read.
StatusOr<PlacedOutputs> StripOutputPlacements(const std::string& module);
PlacedOutputs StripOutputPlacements(const ModuleView& module);

}  // namespace pjrt_neuron::hlo
