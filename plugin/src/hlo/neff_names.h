// Names every parameter and result of an HloModuleProto for neuronx-cc, which binds a NEFF's
// tensors by name: frontend attributes neff_input_names="inputN" on parameter N and
// neff_output_names="output0,output1,..." on the entry computation's root. Also reads the
// entry's signature (element types, dimensions, aliases), which the engine binds and checks by.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

struct ArraySignature {
  int element_type = 0;  // xla.PrimitiveType
  std::vector<int64_t> dims;
};

// Output `output` (an index into the flattened results) is parameter `parameter`, donated.
struct OutputAlias {
  int output = 0;
  int parameter = 0;
  bool must_alias = false;
};

struct EntrySignature {
  std::string module_name;
  std::vector<ArraySignature> parameters;  // by parameter number
  std::vector<ArraySignature> outputs;     // the leaves of the result, in order
  std::vector<OutputAlias> aliases;
};

struct NeffNamedModule {
  std::string module;  // the serialized HloModuleProto, named
  EntrySignature signature;
};

std::string NeffInputName(int parameter);
std::string NeffOutputName(int output);

// The module with names set (replacing any earlier ones) and with a copy in front of every
// result that is a parameter passed straight through: a NEFF keeps inputs and outputs in
// separate tensors. INVALID_ARGUMENT for a malformed module; UNIMPLEMENTED for tuple-shaped
// parameters, which no framework sends to Neuron.
StatusOr<NeffNamedModule> WithNeffNames(const std::string& module);
StatusOr<NeffNamedModule> WithNeffNames(const ModuleView& module);

// The signature alone, of a module named or not.
StatusOr<EntrySignature> ReadEntrySignature(const std::string& module);
StatusOr<EntrySignature> ReadEntrySignature(const ModuleView& module);

}  // namespace pjrt_neuron::hlo
