// The compile pipeline (compile_pipeline.h): normalise, rewrite, compile through the cache, analyse.
#include "core/compile_pipeline.h"

#include <chrono>
#include <ctime>
#include <optional>

#include "common/json.h"
#include "common/settings.h"
#include "common/version.h"
#include "core/compat_report.h"
#include "hlo/collective_program.h"
#include "hlo/compat_analysis.h"
#include "hlo/resize_calls.h"

namespace pjrt_neuron::core {
namespace {

const hlo::DeviceIdMap kSameIds = [](int64_t id) -> StatusOr<int64_t> { return id; };

// Programs of several replicas in one partition get a channel id on each collective that lacks
// one (hlo/collective_program.h), so ranks whose torch-xla programs differ can meet. Every
// compile goes through here, in every mode, so an executable from the cache is always
// rewritten; with one partition the channel ids change nothing else.
engine::Program WithCollectiveChannels(const engine::Program& program, const std::string& normalized_options,
                                       std::string* storage) {
  hlo::ReplicaLayout layout;
  if (program.format != "hlo" || !hlo::NormalizeCompileOptions(normalized_options, kSameIds, &layout).ok() ||
      layout.num_replicas <= 1 || layout.num_partitions > 1) {
    return program;
  }
  *storage = hlo::WithCollectiveChannels(std::string(program.code, program.code_size));
  engine::Program rewritten = program;
  rewritten.code = storage->data();
  rewritten.code_size = storage->size();
  return rewritten;
}

// torch-xla's NEURON-only Resize* custom calls become ordinary HLO (hlo/resize_calls.h).
StatusOr<engine::Program> WithResizeLowered(const engine::Program& program, std::string* storage) {
  const bool with_config = program.format == "hlo_with_config";
  if (program.format != "hlo" && !with_config) return program;
  bool changed = false;
  PN_ASSIGN_OR_RETURN(std::string module, hlo::LowerResizeCustomCalls(std::string(program.code, program.code_size),
                                                                     with_config, &changed));
  if (!changed) return program;
  *storage = std::move(module);
  engine::Program rewritten = program;
  rewritten.code = storage->data();
  rewritten.code_size = storage->size();
  return rewritten;
}

StatusOr<std::unique_ptr<engine::Executable>> TimedCompile(engine::Engine& engine, const engine::Program& program,
                                                           const std::string& normalized_options) {
  std::string lowered_code, rewritten_code;
  PN_ASSIGN_OR_RETURN(const engine::Program lowered, WithResizeLowered(program, &lowered_code));
  const engine::Program to_compile = WithCollectiveChannels(lowered, normalized_options, &rewritten_code);
  auto start = std::chrono::steady_clock::now();
  auto compiled = engine.Compile(to_compile, normalized_options);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CountMetrics([&](CacheMetrics& m) {
    m.compiles += 1;
    m.compile_seconds += elapsed.count();
  });
  if (!compiled.ok() && compiled.status().code() == ErrorCode::kUnknown) {
    // The engine reports unparsable programs as UNKNOWN; to the caller it is bad input.
    return InvalidArgument("the '" + program.format + "' program could not be compiled: " +
                           compiled.status().message());
  }
  return compiled;
}

// The entry's header line, which `pjrt-neuron cache ls` shows.
std::string EntryHeader(const std::string& program_name, const std::string& format, const std::string& engine) {
  json::Writer header(json::Writer::Spacing::kSpaced);
  header.BeginObject()
      .Field("program", program_name)
      .Field("format", format)
      .Field("created", static_cast<int64_t>(std::time(nullptr)))
      .Field("engine", engine)
      .Field("plugin", PluginVersion())
      .EndObject();
  return header.text();
}

// The compile cache key: everything that decides what the compiler produces.
std::string CompileCacheKey(const std::string& engine_description, const Topology& topology,
                            const engine::Program& program, const std::string& normalized_options) {
  return CompileCache::Key({"pjrt-neuron-compile/1", PluginVersion(), engine_description,
                            topology.instance().core_generation, std::to_string(topology.shape().logical_nc_config),
                            settings::Text(settings::Id::kNeuronCcFlags), program.format,
                            std::string(program.code, program.code_size), normalized_options});
}

// A cached executable this engine can load; an entry it cannot load (another engine version's)
// is removed.
std::optional<std::unique_ptr<engine::Executable>> LoadCached(engine::Engine& engine, CompileCache& cache,
                                                              const std::string& key) {
  std::optional<std::string> payload = cache.Load(key);
  if (!payload.has_value()) return std::nullopt;
  auto executable = engine.Deserialize(*payload, nullptr);
  if (!executable.ok()) {
    cache.Remove(key);
    return std::nullopt;
  }
  CountMetrics([](CacheMetrics& m) { m.hits += 1; });
  return std::move(executable.value());
}

}  // namespace

StatusOr<std::string> NormalizeForCompile(const CompileTarget& target, const engine::Program& program,
                                          const std::string& options) {
  if (program.format != "hlo" && program.format != "hlo_with_config" && program.format != "mlir") {
    return InvalidArgument("unknown program format '" + program.format +
                           "'; expected 'hlo' (serialized HloModuleProto) or 'mlir' (StableHLO)");
  }
  if (program.code == nullptr || program.code_size == 0) return InvalidArgument("the program is empty");
  hlo::ReplicaLayout layout;
  PN_ASSIGN_OR_RETURN(std::string normalized, hlo::NormalizeCompileOptions(options, target.to_engine_id, &layout,
                                                                           target.default_engine_cores));
  const size_t cores_needed = static_cast<size_t>(layout.num_replicas) * layout.num_partitions;
  if (cores_needed > target.cores_available) {
    return InvalidArgument("the program asks for " + std::to_string(layout.num_replicas) + " replicas x " +
                           std::to_string(layout.num_partitions) + " partitions = " + std::to_string(cores_needed) +
                           " NeuronCores, but " + target.where + " has " + std::to_string(target.cores_available));
  }
  return normalized;
}

StatusOr<CompileOutcome> CompileNormalized(const CompileTarget& target, const engine::Program& program,
                                           const std::string& normalized, CacheUse cache_use,
                                           const CacheSettings& cache_settings) {
  engine::Engine& engine = *target.engine;
  CompileOutcome outcome;
  if (cache_use == CacheUse::kNone) {
    PN_ASSIGN_OR_RETURN(outcome.executable, TimedCompile(engine, program, normalized));
    outcome.compiled = true;
    return outcome;
  }
  const bool load = cache_use == CacheUse::kLoadOrCompile;
  CompileCache cache(cache_settings);
  const std::string key = CompileCacheKey(engine.description(), *target.topology, program, normalized);
  // A hit: for a client, an executable it can load; for precompile, any valid entry.
  auto found = [&]() -> bool {
    if (!load) return cache.Load(key).has_value();
    if (auto hit = LoadCached(engine, cache, key)) {
      outcome.executable = std::move(*hit);
      return true;
    }
    return false;
  };
  auto remembered = [&]() -> std::optional<Status> {
    std::optional<Status> failure = cache.RememberedFailure(key);
    if (failure.has_value() && load) CountMetrics([](CacheMetrics& m) { m.failures_remembered += 1; });
    return failure;
  };
  if (found()) return outcome;
  if (load) {
    if (auto failure = remembered()) return *failure;
  }
  // One process compiles; the others wait here, then find its result.
  PN_ASSIGN_OR_RETURN(CompileCache::KeyLock lock, cache.Lock(key));
  if (found()) return outcome;
  if (auto failure = remembered()) return *failure;
  if (load) CountMetrics([](CacheMetrics& m) { m.misses += 1; });
  auto compiled = TimedCompile(engine, program, normalized);
  if (!compiled.ok()) {
    if (compiled.status().code() == ErrorCode::kInvalidArgument) cache.RememberFailure(key, compiled.status());
    return compiled.status();
  }
  auto bytes = compiled.value()->Serialize();
  if (!bytes.ok() && !load) return bytes.status();
  if (bytes.ok()) cache.Store(key, EntryHeader(compiled.value()->name(), program.format, engine.description()), *bytes);
  cache.ForgetFailure(key);
  outcome.compiled = true;
  if (load) outcome.executable = std::move(compiled.value());
  return outcome;
}

Status CheckTrainiumCompatibility(const engine::Program& program, engine::Executable& executable,
                                  const std::string& engine_description) {
  PN_ASSIGN_OR_RETURN(CompatSettings settings, ReadCompatSettings());
  if (settings.mode == CompatMode::kOff) return Status::Ok();
  StatusOr<std::vector<hlo::CompatFinding>> findings = Status::Ok();
  if (program.format == "mlir") {
    auto optimized = executable.OptimizedProgram();
    if (!optimized.ok()) return Status::Ok();  // nothing to analyse; the program itself is fine
    findings = hlo::AnalyzeHloModule(optimized->code, optimized->format == "hlo_with_config", /*from_jax=*/true);
  } else {
    findings = hlo::AnalyzeHloModule(std::string(program.code, program.code_size),
                                     program.format == "hlo_with_config", /*from_jax=*/false);
  }
  if (!findings.ok()) return Status::Ok();  // an unreadable module compiled anyway: nothing to say
  int host_outputs = 0;
  for (const engine::OutputShape& output : executable.outputs()) host_outputs += output.memory_kind == "pinned_host";
  if (host_outputs > 0) {
    // The annotations are gone from the engine's program by now (output_placement.h).
    hlo::CompatFinding finding;
    finding.check = "host-offload-outputs";
    finding.what = "outputs placed in host memory (out_shardings with memory_kind \"pinned_host\")";
    finding.why = "the Neuron runtime's public contract names no host memory for a NEFF's outputs; whether "
                  "neuronx-cc and AWS's plugin place them there is not documented (unverified)";
    finding.fix = "return them in device memory and jax.device_put them to pinned_host after the step";
    finding.fails_on_trainium = false;
    finding.count = host_outputs;
    findings->push_back(finding);
  }
  return ReportCompatFindings(settings, executable.name(), findings.value(), engine_description);
}

}  // namespace pjrt_neuron::core
