// Partitions programs for the Neuron engine on XLA's CPU engine (cpu_partitioner.h).
#include "engine/cpu_partitioner.h"

#include <dirent.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "engine/neuron/scratch_dir.h"
#include "engine/sim/sim_engine.h"
#include "hlo/compile_options.h"
#include "hlo/hlo_fields.h"
#include "hlo/wire_format.h"

namespace pjrt_neuron::engine {
namespace {

// A map field's entries parse in order and the last of a key wins, so appended ones override.
std::string WithPartitionDump(std::string options, const std::string& directory) {
  const std::string pass = ".*spmd.*";
  hlo::AppendOptionOverride(&options, "xla_dump_to", &directory, false);
  hlo::AppendOptionOverride(&options, "xla_dump_hlo_pass_re", &pass, false);
  hlo::AppendOptionOverride(&options, "xla_dump_hlo_as_proto", nullptr, true);
  hlo::AppendOptionOverride(&options, "xla_dump_hlo_as_text", nullptr, false);
  return options;
}

// The last module the partitioning pipeline wrote (the steps are numbered in the file names).
StatusOr<std::string> PartitionedModuleIn(const std::string& directory) {
  std::vector<std::string> dumps;
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.find(".after_spmd-partitioning.") != std::string::npos && name.size() > 3 &&
          name.compare(name.size() - 3, 3, ".pb") == 0) {
        dumps.push_back(name);
      }
    }
    closedir(dir);
  }
  if (dumps.empty()) {
    return Internal("the CPU engine compiled the program but wrote no module after SPMD partitioning in " + directory);
  }
  std::sort(dumps.begin(), dumps.end());
  PN_ASSIGN_OR_RETURN(std::string proto, neuron::ReadFile(directory + "/" + dumps.back()));
  std::string module = hlo::HloModuleBytes(proto, true);  // an HloProto: the module is its field 1
  if (module.empty()) return Internal("the partitioned module " + dumps.back() + " holds no HloModuleProto");
  return module;
}

}  // namespace

SpmdPartitioner CpuEnginePartitioner(const EngineOptions& options) {
  struct Lazy {
    std::mutex mutex;
    std::unique_ptr<Engine> engine;
  };
  auto lazy = std::make_shared<Lazy>();
  return [options, lazy](const Program& program, const std::string& compile_options) -> StatusOr<std::string> {
    PN_ASSIGN_OR_RETURN(neuron::ScratchDir scratch, neuron::ScratchDir::Create("pjrt-neuron-partition-"));
    std::lock_guard<std::mutex> lock(lazy->mutex);
    if (lazy->engine == nullptr) {
      PN_ASSIGN_OR_RETURN(lazy->engine, CreateSimEngine(options));
    }
    PN_RETURN_IF_ERROR(lazy->engine->Compile(program, WithPartitionDump(compile_options, scratch.path())).status());
    return PartitionedModuleIn(scratch.path());
  };
}

}  // namespace pjrt_neuron::engine
