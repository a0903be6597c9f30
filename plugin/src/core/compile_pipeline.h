// The one way a program becomes an executable, for clients, ahead-of-time compilation and
// precompile alike: check and normalise the options, rewrite the program's collectives,
// compile through the compile cache (one compiler per program, remembered failures), and
// analyse the result for Trainium.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/compile_cache.h"
#include "core/topology.h"
#include "engine/engine.h"
#include "hlo/compile_options.h"

namespace pjrt_neuron::core {

// Where a program is compiled for, and how our device ids map onto the engine's cores.
struct CompileTarget {
  engine::Engine* engine = nullptr;
  const Topology* topology = nullptr;
  hlo::DeviceIdMap to_engine_id;
  size_t cores_available = 0;
  std::string where;  // names the cores in messages: "this process (trn1.2xlarge)"
  // Where a program placed nowhere runs; null: the engine's default assignment.
  const std::vector<int64_t>* default_engine_cores = nullptr;
};

// Checks the program and its options; returns the options with device ids mapped to the engine's.
StatusOr<std::string> NormalizeForCompile(const CompileTarget& target, const engine::Program& program,
                                          const std::string& options);

enum class CacheUse {
  kNone,           // compile, touch no cache
  kLoadOrCompile,  // a client's compile: load a cached executable, or compile and store it
  kStoreOnly,      // precompile: make sure the cache has it; load nothing
};

struct CompileOutcome {
  std::unique_ptr<engine::Executable> executable;  // null after kStoreOnly
  bool compiled = false;                           // false: the cache had it
};

// Compiles `program` with options from NormalizeForCompile.
StatusOr<CompileOutcome> CompileNormalized(const CompileTarget& target, const engine::Program& program,
                                           const std::string& normalized_options, CacheUse cache_use,
                                           const CacheSettings& cache_settings);

// What Trainium would reject in the program (torch-xla's HLO as sent, JAX's as compiled),
// reported as PJRT_NEURON_COMPAT says.
Status CheckTrainiumCompatibility(const engine::Program& program, engine::Executable& executable,
                                  const std::string& engine_description = "");

}  // namespace pjrt_neuron::core
