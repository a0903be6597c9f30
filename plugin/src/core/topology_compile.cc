// Compiling for a topology: an engine of the topology's size, no cores claimed.
#include "core/topology_compile.h"

#include "core/compile_pipeline.h"
#include "engine/factory.h"

namespace pjrt_neuron::core {
namespace {

// An engine with one core per core of the topology, and options whose device ids are the topology's.
struct TopologyCompile {
  std::unique_ptr<engine::Engine> engine;
  CompileTarget target;
  std::string normalized_options;
};

StatusOr<TopologyCompile> PrepareTopologyCompile(const Topology& topology, const engine::Program& program,
                                                 const std::string& options, const std::string& engine_library_path) {
  const int64_t total = topology.shape().total_cores();
  TopologyCompile prepared;
  prepared.target.topology = &topology;
  prepared.target.to_engine_id = [total](int64_t id) -> StatusOr<int64_t> {
    if (id < 0 || id >= total) {
      return InvalidArgument("the program names device id " + std::to_string(id) + ", which the topology does not have");
    }
    return id;
  };
  prepared.target.cores_available = static_cast<size_t>(total);
  prepared.target.where = topology.instance().name;
  PN_ASSIGN_OR_RETURN(prepared.normalized_options, NormalizeForCompile(prepared.target, program, options));
  engine::EngineRequest request;
  request.options.num_cores = static_cast<int>(total);
  request.options.library_path = engine_library_path;
  PN_ASSIGN_OR_RETURN(prepared.engine, engine::CreateEngine(request, nullptr));
  prepared.target.engine = prepared.engine.get();
  return prepared;
}

}  // namespace

StatusOr<std::shared_ptr<CompiledProgram>> CompileForTopology(const Topology& topology, const engine::Program& program,
                                                              const std::string& options,
                                                              const std::string& engine_library_path) {
  PN_ASSIGN_OR_RETURN(TopologyCompile prepared, PrepareTopologyCompile(topology, program, options, engine_library_path));
  PN_ASSIGN_OR_RETURN(CompileOutcome outcome, CompileNormalized(prepared.target, program, prepared.normalized_options,
                                                                CacheUse::kNone, CacheSettings{}));
  return std::make_shared<CompiledProgram>(std::move(outcome.executable), std::vector<Device*>{},
                                           std::move(prepared.engine));
}

StatusOr<bool> CompileForTopologyCached(const Topology& topology, const engine::Program& program,
                                        const std::string& options, const std::string& engine_library_path,
                                        const CacheSettings& cache_settings) {
  PN_ASSIGN_OR_RETURN(TopologyCompile prepared, PrepareTopologyCompile(topology, program, options, engine_library_path));
  PN_ASSIGN_OR_RETURN(CompileOutcome outcome, CompileNormalized(prepared.target, program, prepared.normalized_options,
                                                                CacheUse::kStoreOnly, cache_settings));
  return outcome.compiled;
}

}  // namespace pjrt_neuron::core
