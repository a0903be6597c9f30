// JAX's programs (StableHLO, format "mlir") as HloModuleProtos for neuronx-cc: converted by
// pjrt_neuron/_neuron_mlir_to_hlo.py in a Python subprocess, through jaxlib's own converter,
// so that this library links no MLIR and a torch-xla process never needs JAX.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

struct MlirConverter {
  std::vector<std::string> command;  // the program's path and the output's follow
  std::vector<std::pair<std::string, std::string>> environment;
};

// PJRT_NEURON_MLIR_CONVERTER (a command, split like a shell) or this process's Python running
// `-m pjrt_neuron._neuron_mlir_to_hlo`, with the package's directory on PYTHONPATH when this
// library was installed inside it.
StatusOr<MlirConverter> DefaultMlirConverter();

// INVALID_ARGUMENT when the program does not convert; FAILED_PRECONDITION when the converter
// cannot run (no JAX in that Python, a jaxlib without the private API).
StatusOr<std::string> ConvertMlirToHlo(const MlirConverter& converter, const std::string& program);

}  // namespace pjrt_neuron::engine::neuron
