// Appends the estimate's records (estimate_report.h) to PJRT_NEURON_ESTIMATE_REPORT.
#include "core/estimate_report.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "common/json.h"
#include "common/settings.h"
#include "core/topology.h"
#include "hlo/cost_analysis.h"

namespace pjrt_neuron::core {
namespace {

std::mutex& ReportMutex() {
  static std::mutex mutex;
  return mutex;
}

void AppendLine(const std::string& path, const std::string& line) {
  std::lock_guard<std::mutex> lock(ReportMutex());
  if (FILE* report = std::fopen(path.c_str(), "a")) {
    std::fputs((line + "\n").c_str(), report);
    std::fclose(report);
  }
}

// The program whose shapes are one core's: JAX's programs are StableHLO and partitioned programs
// are global until the engine has partitioned them, so those are read after its optimisation.
StatusOr<hlo::ProgramCost> CostOf(const engine::Program& program, engine::Executable& executable) {
  if (program.format == "mlir" || executable.num_partitions() > 1) {
    PN_ASSIGN_OR_RETURN(engine::ProgramText optimized, executable.OptimizedProgram());
    return hlo::AnalyzeProgramCost(optimized.code, optimized.format == "hlo_with_config");
  }
  return hlo::AnalyzeProgramCost(std::string(program.code, program.code_size), program.format == "hlo_with_config");
}

}  // namespace

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReportProgramCost(const engine::Program& program, engine::Executable& executable,
                              const Topology& topology) {
  const std::string path = settings::Text(settings::Id::kEstimateReport);
  if (path.empty()) return "";
  auto cost = CostOf(program, executable);
  if (!cost.ok()) return "";
  static int programs_reported = 0;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(ReportMutex());
    id = std::to_string(getpid()) + "-" + std::to_string(++programs_reported);
  }
  json::Writer line;
  line.BeginObject()
      .Field("record", "program")
      .Field("program_id", id)
      .Field("program", executable.name())
      .Field("format", program.format)
      .Field("instance_type", topology.instance().name)
      .Field("core_generation", topology.instance().core_generation)
      .Field("logical_nc_config", topology.shape().logical_nc_config)
      .Field("num_replicas", executable.num_replicas())
      .Field("num_partitions", executable.num_partitions())
      .Key("cost");
  // The cost is a JSON object already: it goes in as the last member's value.
  std::string text = line.text() + hlo::ProgramCostJson(cost.value()) + "}";
  AppendLine(path, text);
  return id;
}

void ReportExecution(const std::string& program_id, const std::vector<int>& devices, int64_t start_us,
                     int64_t end_us) {
  const std::string path = settings::Text(settings::Id::kEstimateReport);
  if (path.empty() || program_id.empty()) return;
  json::Writer line;
  line.BeginObject()
      .Field("record", "execution")
      .Field("program_id", program_id)
      .Field("pid", static_cast<int64_t>(getpid()))
      .Field("devices", devices)
      .Field("start_us", start_us)
      .Field("end_us", end_us)
      .EndObject();
  AppendLine(path, line.text());
}

}  // namespace pjrt_neuron::core
