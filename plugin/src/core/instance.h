// Simulated Trainium instance types: the one table of chips, cores and HBM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pjrt_neuron::core {

struct InstanceType {
  const char* name;
  int chips;
  int cores_per_chip;          // logical NeuronCores visible to frameworks
  int64_t hbm_bytes_per_core;
  const char* core_generation;  // the device kind frameworks see
  bool torus;                  // chips linked in a 2D torus
};

inline constexpr int64_t kGiB = int64_t{1} << 30;

inline const std::vector<InstanceType>& KnownInstanceTypes() {
  static const std::vector<InstanceType> kTypes = {
      {"trn1.2xlarge", 1, 2, 16 * kGiB, "NeuronCore-v2", false},
      {"trn1.32xlarge", 16, 2, 16 * kGiB, "NeuronCore-v2", true},
      {"trn1n.32xlarge", 16, 2, 16 * kGiB, "NeuronCore-v2", true},
      {"trn2.48xlarge", 16, 4, 24 * kGiB, "NeuronCore-v3", true},
      {"inf2.xlarge", 1, 2, 16 * kGiB, "NeuronCore-v2", false},
      {"inf2.8xlarge", 1, 2, 16 * kGiB, "NeuronCore-v2", false},
      {"inf2.24xlarge", 6, 2, 16 * kGiB, "NeuronCore-v2", false},
      {"inf2.48xlarge", 12, 2, 16 * kGiB, "NeuronCore-v2", false},
  };
  return kTypes;
}

inline const InstanceType* FindInstanceType(const std::string& name) {
  for (const InstanceType& t : KnownInstanceTypes()) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

inline std::string KnownInstanceTypeNames() {
  std::string names;
  for (const InstanceType& t : KnownInstanceTypes()) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

}  // namespace pjrt_neuron::core
