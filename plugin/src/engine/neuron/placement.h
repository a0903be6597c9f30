// Where a program runs, read from its (normalised) xla.CompileOptionsProto: replica and
// partition counts and the engine cores of its device assignment; and the assignment written
// back as an xla.DeviceAssignmentProto.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace pjrt_neuron::engine::neuron {

struct Placement {
  int num_replicas = 1;
  int num_partitions = 1;
  std::vector<int> cores;  // [partition * num_replicas + replica]; empty: not placed
  int device_ordinal = -1;
};

StatusOr<Placement> ReadPlacement(const std::string& compile_options);

std::string DeviceAssignmentBytes(int num_replicas, int num_partitions, const std::vector<int>& cores);

}  // namespace pjrt_neuron::engine::neuron
