// PJRT_Executable: a compiled program's description, serialisation and reloading.
#include <cstring>

#include "api/executable_views.h"

namespace pjrt_neuron::api {
namespace {


StatusOr<core::Executable*> UnwrapExecutable(const PJRT_Executable* e) {
  return Unwrap<core::Executable>(e, "executable");
}

PN_ENTRY(PJRT_Executable_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_Destroy_Args, executable);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  delete executable;
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_Name) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_Name_Args, executable_name_size);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  args->executable_name = views.name.c_str();
  args->executable_name_size = views.name.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_NumReplicas) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_NumReplicas_Args, num_replicas);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  args->num_replicas = executable->compiled().num_replicas();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_NumPartitions) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_NumPartitions_Args, num_partitions);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  args->num_partitions = executable->compiled().num_partitions();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_NumOutputs) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_NumOutputs_Args, num_outputs);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  args->num_outputs = executable->compiled().outputs().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_SizeOfGeneratedCodeInBytes) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  PN_ASSIGN_OR_RETURN(args->size_in_bytes, executable->compiled().SizeOfGeneratedCodeInBytes());
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_GetCostAnalysis) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_GetCostAnalysis_Args, properties);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  if (views.cost_analysis == nullptr) return views.cost_analysis_status;
  args->properties = views.cost_analysis->data();
  args->num_properties = views.cost_analysis->size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_OutputElementTypes) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_OutputElementTypes_Args, num_output_types);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  args->output_types = const_cast<PJRT_Buffer_Type*>(views.output_types.data());
  args->num_output_types = views.output_types.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_OutputDimensions) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_OutputDimensions_Args, dim_sizes);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  args->num_outputs = views.output_ranks.size();
  args->dims = views.output_dims.data();
  args->dim_sizes = views.output_ranks.data();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_OutputMemoryKinds) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  args->num_outputs = views.memory_kinds.size();
  args->memory_kinds = views.memory_kinds.data();
  args->memory_kind_sizes = views.memory_kind_sizes.data();
  return Status::Ok();
}

// Two calls, as the header asks: first with code == nullptr for the size, then to fill it.
PN_ENTRY(PJRT_Executable_OptimizedProgram) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_OptimizedProgram_Args, program);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  if (args->program == nullptr) return InvalidArgument("`program` is null");
  PN_REQUIRE_ARGS(args->program, PJRT_Program, format_size);
  PN_ASSIGN_OR_RETURN(engine::ProgramText optimized, executable->compiled().OptimizedProgram());
  const std::string& code = optimized.code;
  // Formats are the engine's string constants ("hlo_with_config"), so a static copy outlives the call.
  static const std::string kHloWithConfig = "hlo_with_config", kHlo = "hlo";
  const std::string& format = optimized.format == kHlo ? kHlo : kHloWithConfig;
  args->program->format = format.c_str();
  args->program->format_size = format.size();
  if (args->program->code == nullptr) {
    args->program->code_size = code.size();
    return Status::Ok();
  }
  if (args->program->code_size < code.size()) {
    return InvalidArgument("program code_size is " + std::to_string(args->program->code_size) + ", needs " +
                           std::to_string(code.size()));
  }
  std::memcpy(args->program->code, code.data(), code.size());
  args->program->code_size = code.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_Serialize) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_Serialize_Args, serialized_executable_deleter);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  PN_ASSIGN_OR_RETURN(std::string serialized, executable->compiled().Serialize());
  auto* bytes = new std::string(std::move(serialized));
  args->serialized_bytes = bytes->data();
  args->serialized_bytes_size = bytes->size();
  args->serialized_executable = reinterpret_cast<PJRT_SerializedExecutable*>(bytes);
  args->serialized_executable_deleter = [](PJRT_SerializedExecutable* e) { delete reinterpret_cast<std::string*>(e); };
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_Fingerprint) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_Fingerprint_Args, executable_fingerprint_size);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  const ExecutableViews& views = ViewsOf(executable->program());
  if (!views.fingerprint_status.ok()) return views.fingerprint_status;
  args->executable_fingerprint = views.fingerprint.c_str();
  args->executable_fingerprint_size = views.fingerprint.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_GetCompiledMemoryStats) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_GetCompiledMemoryStats_Args, temp_size_in_bytes);
  PN_ASSIGN_OR_RETURN(core::Executable * executable, UnwrapExecutable(args->executable));
  PN_ASSIGN_OR_RETURN(engine::CompiledMemoryStats stats, executable->compiled().MemoryStats());
  args->generated_code_size_in_bytes = stats.generated_code_size_in_bytes;
  args->argument_size_in_bytes = stats.argument_size_in_bytes;
  args->output_size_in_bytes = stats.output_size_in_bytes;
  args->alias_size_in_bytes = stats.alias_size_in_bytes;
  args->temp_size_in_bytes = stats.temp_size_in_bytes;
  if (PN_HAS(args, PJRT_Executable_GetCompiledMemoryStats_Args, host_temp_size_in_bytes)) {
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
  }
  if (PN_HAS(args, PJRT_Executable_GetCompiledMemoryStats_Args, peak_memory_in_bytes)) {
    args->peak_memory_in_bytes = stats.peak_memory_in_bytes;
  }
  return Status::Ok();
}

PN_ENTRY(PJRT_Executable_DeserializeAndLoad) {
  PN_REQUIRE_ARGS(args, PJRT_Executable_DeserializeAndLoad_Args, loaded_executable);
  PN_ASSIGN_OR_RETURN(core::Client * client, Unwrap<core::Client>(args->client, "client"));
  if (args->serialized_executable == nullptr) return InvalidArgument("`serialized_executable` is null");
  std::string bytes(args->serialized_executable, args->serialized_executable_size);
  std::string overridden;
  bool has_override = PN_HAS(args, PJRT_Executable_DeserializeAndLoad_Args, overridden_serialized_compile_options_size) &&
                      args->overridden_serialized_compile_options != nullptr;
  if (has_override) {
    overridden.assign(args->overridden_serialized_compile_options, args->overridden_serialized_compile_options_size);
  }
  PN_ASSIGN_OR_RETURN(auto loaded, client->Deserialize(bytes, has_override ? &overridden : nullptr));
  args->loaded_executable = Wrap<PJRT_LoadedExecutable>(loaded.release());
  return Status::Ok();
}

}  // namespace

const ExecutableViews& ViewsOf(const std::shared_ptr<core::CompiledProgram>& program) {
  static ViewCache<core::CompiledProgram, ExecutableViews> cache;
  return cache.Get(program, [](core::CompiledProgram& p) {
    auto views = std::make_unique<ExecutableViews>();
    views->name = p.name();
    for (const engine::OutputShape& out : p.outputs()) {
      views->output_types.push_back(out.type);
      views->output_ranks.push_back(out.dims.size());
      views->output_dims.insert(views->output_dims.end(), out.dims.begin(), out.dims.end());
      views->memory_kind_strings.push_back(out.memory_kind);
    }
    for (const std::string& kind : views->memory_kind_strings) {
      views->memory_kinds.push_back(kind.c_str());
      views->memory_kind_sizes.push_back(kind.size());
    }
    auto fingerprint = p.Fingerprint();
    views->fingerprint_status = fingerprint.status();
    if (fingerprint.ok()) views->fingerprint = fingerprint.value();
    auto cost = p.CostAnalysis();
    views->cost_analysis_status = cost.status();
    if (cost.ok()) views->cost_analysis = std::make_unique<NamedValues>(cost.value());
    return views;
  });
}

void BindExecutables(PJRT_Api* api) {
  api->PJRT_Executable_Destroy = PJRT_Executable_Destroy;
  api->PJRT_Executable_Name = PJRT_Executable_Name;
  api->PJRT_Executable_NumReplicas = PJRT_Executable_NumReplicas;
  api->PJRT_Executable_NumPartitions = PJRT_Executable_NumPartitions;
  api->PJRT_Executable_NumOutputs = PJRT_Executable_NumOutputs;
  api->PJRT_Executable_SizeOfGeneratedCodeInBytes = PJRT_Executable_SizeOfGeneratedCodeInBytes;
  api->PJRT_Executable_GetCostAnalysis = PJRT_Executable_GetCostAnalysis;
  api->PJRT_Executable_OutputElementTypes = PJRT_Executable_OutputElementTypes;
  api->PJRT_Executable_OutputDimensions = PJRT_Executable_OutputDimensions;
  api->PJRT_Executable_OutputMemoryKinds = PJRT_Executable_OutputMemoryKinds;
  api->PJRT_Executable_OptimizedProgram = PJRT_Executable_OptimizedProgram;
  api->PJRT_Executable_Serialize = PJRT_Executable_Serialize;
  api->PJRT_Executable_Fingerprint = PJRT_Executable_Fingerprint;
  api->PJRT_Executable_GetCompiledMemoryStats = PJRT_Executable_GetCompiledMemoryStats;
  api->PJRT_Executable_DeserializeAndLoad = PJRT_Executable_DeserializeAndLoad;
}

}  // namespace pjrt_neuron::api
