// A partitioned program (XLA's SPMD partitioner's output: one program that every core runs,
// each as its own partition) restated for a runtime that knows a core of a collective program
// only by its rank, as the Neuron runtime does (nrt_load_collectives): each partition becomes a
// replica. torch-neuronx's data-parallel programs reach neuronx-cc in this replica form.
#pragma once

#include <string>

#include "common/status.h"
#include "hlo/module_view.h"

namespace pjrt_neuron::hlo {

// The serialized HloModuleProto `module`, of one replica and `num_partitions` partitions, with
// partition-id read as replica-id, and each collective, which named partitions (a channel id,
// its groups of partitions or of flattened ids: with one replica both are partition numbers),
// taking the same numbers as replicas (no channel id, cross-replica groups). UNIMPLEMENTED,
// naming the instruction, for what has no replica form here: a collective without a channel id
// (a cross-replica one) and replica-id (always 0 in such a program). INVALID_ARGUMENT when the
// module is malformed.
StatusOr<std::string> PartitionsAsReplicas(const std::string& module);
StatusOr<std::string> PartitionsAsReplicas(const ModuleView& module);

}  // namespace pjrt_neuron::hlo
