// Just enough of xla.CompileOptionsProto's wire format to check what callers send:
// the XLA CPU engine aborts the process on a replica count of 0, which is what an
// empty options message means.
#pragma once

#include <string>

#include "common/status.h"

namespace pjrt_neuron::core {

struct ReplicaLayout {
  int num_replicas = 0;    // 0: not set
  int num_partitions = 0;  // 0: not set
};

// Reads executable_build_options.num_replicas / num_partitions.
StatusOr<ReplicaLayout> ReadReplicaLayout(const std::string& serialized_options);

// Returns the options with unset replica and partition counts set to 1.
StatusOr<std::string> NormalizeCompileOptions(const std::string& serialized_options, ReplicaLayout* layout);

}  // namespace pjrt_neuron::core
