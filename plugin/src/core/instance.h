// Simulated Trainium instance types: the one table of chips, cores, HBM and links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::core {

inline constexpr int64_t kGiB = int64_t{1} << 30;

enum class ChipLinks { kNone, kRing, kTorus2D };

struct InstanceType {
  const char* name;
  int chips;
  int physical_cores_per_chip;
  int64_t hbm_bytes_per_chip;
  const char* core_generation;  // the device kind frameworks see
  int default_logical_nc_config;
  int max_logical_nc_config;    // 1 on NeuronCore-v2; 2 on v3
  ChipLinks links;
  int torus_width;              // chips per row of the 2D torus
};

inline const std::vector<InstanceType>& KnownInstanceTypes() {
  static const std::vector<InstanceType> kTypes = {
      {"trn1.2xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0},
      {"trn1.32xlarge", 16, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kTorus2D, 4},
      {"trn1n.32xlarge", 16, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kTorus2D, 4},
      {"trn2.48xlarge", 16, 8, 96 * kGiB, "NeuronCore-v3", 2, 2, ChipLinks::kTorus2D, 4},
      {"inf2.xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0},
      {"inf2.8xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0},
      {"inf2.24xlarge", 6, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kRing, 0},
      {"inf2.48xlarge", 12, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kRing, 0},
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

// An instance with its logical NeuronCore configuration applied: what frameworks see.
struct InstanceShape {
  const InstanceType* type = nullptr;
  int logical_nc_config = 1;
  int cores_per_chip = 0;
  int64_t hbm_bytes_per_core = 0;

  int total_cores() const { return type->chips * cores_per_chip; }
  int chip_of(int core) const { return core / cores_per_chip; }
  std::vector<int> chip_coordinates(int chip) const;
  std::vector<int> connected_chips(int chip) const;
};

// `logical_nc_config` 0 means the instance's default.
StatusOr<InstanceShape> ShapeInstance(const std::string& name, int logical_nc_config);

}  // namespace pjrt_neuron::core
