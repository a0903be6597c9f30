// Where a program runs, read from its (normalised) xla.CompileOptionsProto: replica and
// partition counts and the engine cores of its device assignment; the assignment written back
// as an xla.DeviceAssignmentProto; and whether its replicas are ranks that must meet.
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
  bool spmd = false;  // use_spmd_partitioning: one program to split, not one per partition
};

StatusOr<Placement> ReadPlacement(const std::string& compile_options);

std::string DeviceAssignmentBytes(int num_replicas, int num_partitions, const std::vector<int>& cores);

// Whether the replicas of a program (a serialized HloModuleProto) must run as ranks of one
// communicator: it has collectives or asks for its replica or partition id. Otherwise each
// core gets a model of its own, and any one core may run it alone. True when unreadable.
bool NeedsRanks(const std::string& module);

}  // namespace pjrt_neuron::engine::neuron
