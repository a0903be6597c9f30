// Simulated Trainium instance types: the one table of chips, cores, HBM, links and prices,
// and the per-generation figures estimates use.
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
  double on_demand_usd_per_hour;  // AWS's published on-demand price; 0 where none is published
};

// Per-chip figures of a NeuronCore generation, for estimates (NEURON_RUNTIME.md, AWS's
// architecture pages). A core's share is the chip's divided by its physical cores.
struct CoreGenerationFigures {
  const char* core_generation;
  double matmul_tflops_bf16;      // dense BF16/FP16/TF32 on the TensorEngines, a chip
  double matmul_tflops_fp8;
  double matmul_tflops_fp32;
  double vector_tflops_per_core;  // VectorEngine, FP32, a physical core
  double scalar_tflops_per_core;  // ScalarEngine (transcendentals), FP32, a physical core
  double hbm_bytes_per_second;    // a chip
  double link_bytes_per_second;   // NeuronLink, a chip to its neighbours (assumed: see README)
  int64_t sbuf_bytes_per_core;
};

inline const std::vector<CoreGenerationFigures>& KnownCoreGenerations() {
  static const std::vector<CoreGenerationFigures> kGenerations = {
      {"NeuronCore-v2", 190, 190, 47.5, 2.3, 2.9, 820e9, 384e9, 24 * (int64_t{1} << 20)},
      {"NeuronCore-v3", 667, 1299, 181, 1.0, 1.2, 2.9e12, 1280e9, 28 * (int64_t{1} << 20)},
  };
  return kGenerations;
}

inline const CoreGenerationFigures* FindCoreGeneration(const std::string& name) {
  for (const CoreGenerationFigures& g : KnownCoreGenerations()) {
    if (name == g.core_generation) return &g;
  }
  return nullptr;
}

inline const std::vector<InstanceType>& KnownInstanceTypes() {
  static const std::vector<InstanceType> kTypes = {
      {"trn1.2xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0, 1.34},
      {"trn1.32xlarge", 16, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kTorus2D, 4, 21.50},
      {"trn1n.32xlarge", 16, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kTorus2D, 4, 0},
      {"trn2.48xlarge", 16, 8, 96 * kGiB, "NeuronCore-v3", 2, 2, ChipLinks::kTorus2D, 4, 0},
      {"inf2.xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0, 0.758},
      {"inf2.8xlarge", 1, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kNone, 0, 1.97},
      {"inf2.24xlarge", 6, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kRing, 0, 6.49},
      {"inf2.48xlarge", 12, 2, 32 * kGiB, "NeuronCore-v2", 1, 1, ChipLinks::kRing, 0, 12.981},
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
