// Which NEFF tensor each parameter and result of a program is, matched by name from what
// nrt_get_model_tensor_info reports, with byte sizes checked against the program's shapes.
// Never by position, never by the runtime's dtype (see the contract).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/neff_names.h"

namespace pjrt_neuron::engine::neuron {

struct NeffTensor {
  std::string name;
  int usage = 0;  // kNrtUsageInput or kNrtUsageOutput
  size_t size = 0;
};

struct TensorBinding {
  std::vector<std::string> input_names;   // per parameter; empty: not in the NEFF (zero bytes)
  std::vector<std::string> output_names;  // per result; empty: not in the NEFF (zero bytes)
  std::vector<int> output_alias;          // per result: the parameter whose tensor it is, or -1
};

// `parameter_bytes` and `output_bytes` are the program's dense sizes. The failure names the
// tensor and what was expected (INTERNAL: the NEFF does not match its program).
StatusOr<TensorBinding> BindTensors(const hlo::EntrySignature& signature, const std::vector<size_t>& parameter_bytes,
                                    const std::vector<size_t>& output_bytes, const std::vector<NeffTensor>& tensors,
                                    const std::string& program);

// The suffix a donated input's name carries when the compiler aliased it to an output.
inline constexpr char kMustAliasSuffix[] = ".must_alias_input";

}  // namespace pjrt_neuron::engine::neuron
