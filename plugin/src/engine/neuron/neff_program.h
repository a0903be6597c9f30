// A compiled program as the Neuron engine keeps and serialises it: the NEFF, the HLO it was
// compiled from (for OptimizedProgram), its signature (what tensors are bound and checked by)
// and its placement. What the compile cache stores is SerializeNeffProgram's bytes.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "hlo/neff_names.h"

namespace pjrt_neuron::engine::neuron {

struct NeffProgram {
  std::string name;
  int num_replicas = 1;
  int num_partitions = 1;
  std::vector<int> cores;  // the engine core of each replica
  hlo::EntrySignature signature;
  std::string hlo_module;  // named, as compiled
  std::string neff;
  std::string made_by;  // compiler version, target and lnc
};

std::string SerializeNeffProgram(const NeffProgram& program);
// INVALID_ARGUMENT for bytes that are not one (another engine's, a corrupt cache entry).
StatusOr<NeffProgram> DeserializeNeffProgram(const std::string& bytes);

}  // namespace pjrt_neuron::engine::neuron
