// Graph collection and parallel precompilation (`pjrt-neuron precompile`), as Neuron's
// neuron_parallel_compile does it: one run records every program without running it, then
// worker processes compile the records into the compile cache.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Topology;

// PJRT_NEURON_GRAPH_COLLECTION: the directory programs are recorded to; empty when off.
std::string GraphCollectionDirectory();

// Records a program the client is compiling; says once, loudly, that results are not meaningful.
void RecordProgram(const std::string& directory, const Topology& topology, const engine::Program& program,
                   const std::string& options);

enum class PrecompileResult { kCompiled, kAlreadyCached };

// Compiles one recorded program into the compile cache, without claiming cores.
StatusOr<PrecompileResult> PrecompileRecord(const std::string& record_path);

}  // namespace pjrt_neuron::core
