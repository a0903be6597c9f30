// The Neuron engine's settings, read once from the environment and checked: which runtime
// library and compiler, the compiler's flags, the logical NeuronCore config, progress reports.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

struct NeuronSettings {
  std::string nrt_library;         // PJRT_NEURON_NRT_LIBRARY, else libnrt.so.1
  std::string neuronx_cc;          // PJRT_NEURON_NEURONX_CC, else neuronx-cc on PATH
  std::vector<std::string> cc_flags;  // NEURON_CC_FLAGS, split like a shell
  int lnc = 0;                     // NEURON_LOGICAL_NC_CONFIG; 0: the target's default
  double progress_after_seconds = 5;  // PJRT_NEURON_COMPILE_PROGRESS_SECONDS; 0: none
  std::string instance_type;       // PJRT_NEURON_INSTANCE_TYPE: the target when the runtime does not say
};

// INVALID_ARGUMENT naming the variable and its value when one cannot work.
StatusOr<NeuronSettings> ReadNeuronSettings();

}  // namespace pjrt_neuron::engine::neuron
