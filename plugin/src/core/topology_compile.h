// Compiling for a topology without claiming its cores: ahead-of-time compilation (PJRT_Compile)
// and precompile's workers, through the same pipeline as a client's compile.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "core/compile_cache.h"
#include "core/executable.h"
#include "core/topology.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

// The result is loaded later with Client::Deserialize.
StatusOr<std::shared_ptr<CompiledProgram>> CompileForTopology(const Topology& topology, const engine::Program& program,
                                                              const std::string& options,
                                                              const std::string& engine_library_path);

// Compiles for a topology into the compile cache; false when the cache already had it.
StatusOr<bool> CompileForTopologyCached(const Topology& topology, const engine::Program& program,
                                        const std::string& options, const std::string& engine_library_path,
                                        const CacheSettings& cache_settings);

}  // namespace pjrt_neuron::core
