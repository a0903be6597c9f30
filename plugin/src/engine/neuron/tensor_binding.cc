// Binding a program's parameters and results to NEFF tensors by name (tensor_binding.h).
#include "engine/neuron/tensor_binding.h"

#include <cstdlib>

#include "engine/neuron/nrt_api.h"

namespace pjrt_neuron::engine::neuron {
namespace {

// "input12" -> 12 for prefix "input"; -1 when the name is not of that form.
int NumberAfter(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 9) {
    return -1;
  }
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
  }
  if (name[prefix.size()] == '0' && name.size() > prefix.size() + 1) return -1;  // "input01" is not ours
  return std::atoi(name.c_str() + prefix.size());
}

std::string Listing(const std::vector<NeffTensor>& tensors) {
  std::string out;
  for (const NeffTensor& t : tensors) {
    out += (out.empty() ? "" : ", ") + t.name + " (" + (t.usage == kNrtUsageInput ? "in" : "out") + ", " +
           std::to_string(t.size) + " B)";
  }
  return out.empty() ? "none" : out;
}

}  // namespace

StatusOr<TensorBinding> BindTensors(const hlo::EntrySignature& signature, const std::vector<size_t>& parameter_bytes,
                                    const std::vector<size_t>& output_bytes, const std::vector<NeffTensor>& tensors,
                                    const std::string& program) {
  const std::string where = "the NEFF of '" + program + "'";
  auto mismatch = [&](const std::string& what) {
    return Internal(where + " does not match its program: " + what + " (the NEFF's tensors: " + Listing(tensors) + ")");
  };
  TensorBinding binding;
  binding.input_names.assign(signature.parameters.size(), "");
  binding.output_names.assign(signature.outputs.size(), "");
  binding.output_alias.assign(signature.outputs.size(), -1);
  std::vector<bool> must_alias(signature.parameters.size(), false);
  const std::string suffix = kMustAliasSuffix;
  for (const NeffTensor& t : tensors) {
    if (t.usage == kNrtUsageInput) {
      std::string base = t.name;
      const bool aliased = base.size() > suffix.size() && base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (aliased) base.erase(base.size() - suffix.size());
      const int n = NumberAfter(base, "input");
      if (n < 0 || static_cast<size_t>(n) >= signature.parameters.size()) {
        return mismatch("input tensor '" + t.name + "' is not one of its " + std::to_string(signature.parameters.size()) +
                        " parameters");
      }
      if (!binding.input_names[n].empty()) {
        return mismatch("parameter " + std::to_string(n) + " is both '" + binding.input_names[n] + "' and '" + t.name + "'");
      }
      if (t.size != parameter_bytes[n]) {
        return mismatch("input tensor '" + t.name + "' holds " + std::to_string(t.size) + " bytes, parameter " +
                        std::to_string(n) + " " + std::to_string(parameter_bytes[n]));
      }
      binding.input_names[n] = t.name;
      must_alias[n] = aliased;
    } else if (t.usage == kNrtUsageOutput) {
      const int n = NumberAfter(t.name, "output");
      if (n < 0 || static_cast<size_t>(n) >= signature.outputs.size()) {
        return mismatch("output tensor '" + t.name + "' is not one of its " + std::to_string(signature.outputs.size()) +
                        " results");
      }
      if (!binding.output_names[n].empty()) return mismatch("output tensor '" + t.name + "' appears twice");
      if (t.size != output_bytes[n]) {
        return mismatch("output tensor '" + t.name + "' holds " + std::to_string(t.size) + " bytes, result " +
                        std::to_string(n) + " " + std::to_string(output_bytes[n]));
      }
      binding.output_names[n] = t.name;
    } else {
      return mismatch("tensor '" + t.name + "' has usage " + std::to_string(t.usage) + ", neither input nor output");
    }
  }
  for (size_t i = 0; i < parameter_bytes.size(); ++i) {
    if (parameter_bytes[i] > 0 && binding.input_names[i].empty()) {
      return mismatch("parameter " + std::to_string(i) + " ('" + hlo::NeffInputName(static_cast<int>(i)) +
                      "') has no input tensor");
    }
  }
  for (size_t i = 0; i < output_bytes.size(); ++i) {
    if (output_bytes[i] > 0 && binding.output_names[i].empty()) {
      return mismatch("result " + std::to_string(i) + " ('" + hlo::NeffOutputName(static_cast<int>(i)) +
                      "') has no output tensor");
    }
  }
  // A must-alias input is the same tensor as the output the program aliases it to.
  for (size_t n = 0; n < must_alias.size(); ++n) {
    if (!must_alias[n]) continue;
    int output = -1;
    for (const hlo::OutputAlias& alias : signature.aliases) {
      if (alias.parameter == static_cast<int>(n)) output = alias.output;
    }
    if (output < 0) {
      return mismatch("input tensor '" + binding.input_names[n] + "' must alias an output, but parameter " +
                      std::to_string(n) + " aliases none in the program");
    }
    if (output_bytes[output] != parameter_bytes[n]) {
      return mismatch("parameter " + std::to_string(n) + " aliases result " + std::to_string(output) +
                      " of another size");
    }
    binding.output_alias[output] = static_cast<int>(n);
  }
  return binding;
}

}  // namespace pjrt_neuron::engine::neuron
