// Reports the compatibility analysis's findings (hlo/compat_analysis.h): logs each once per
// process, appends them to the report file and, in strict mode, fails the compilation.
#include "core/compat_report.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <set>

#include "common/json.h"
#include "common/settings.h"

namespace pjrt_neuron::core {

using hlo::CompatFinding;

StatusOr<CompatSettings> ReadCompatSettings() {
  using settings::Id;
  CompatSettings settings;
  PN_ASSIGN_OR_RETURN(std::string mode, settings::ChoiceValue(Id::kCompat));
  settings.mode = mode == "strict" ? CompatMode::kStrict : mode == "off" ? CompatMode::kOff : CompatMode::kWarn;
  PN_ASSIGN_OR_RETURN(settings.strict_numerics, settings::Flag(Id::kCompatStrictNumerics));
  settings.report_path = settings::Text(Id::kCompatReport);
  return settings;
}

namespace {

std::string Location(const CompatFinding& f) {
  if (f.source_file.empty()) {
    return (f.op_name.empty() ? std::string() : f.op_name + " ") +
           "(no source location; torch-xla records one with XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1, which "
           "`pjrt-neuron check` sets)";
  }
  return f.source_file + ":" + std::to_string(f.source_line) + (f.op_name.empty() ? "" : " (" + f.op_name + ")");
}

// One JSON line of the report file, which `pjrt-neuron check` reads.
std::string ReportLine(const std::string& program_name, const std::string& program_id, const CompatFinding& f,
                       const std::string& engine) {
  json::Writer line;
  line.BeginObject()
      .Field("program", program_name)
      .Field("program_id", program_id)
      .Field("check", f.check)
      .Field("what", f.what)
      .Field("why", f.why)
      .Field("fix", f.fix)
      .Field("fails_on_trainium", f.fails_on_trainium)
      .Field("beyond_int32", f.beyond_int32)
      .Field("op_name", f.op_name)
      .Field("source_file", f.source_file)
      .Field("source_line", f.source_line)
      .Field("count", f.count)
      .Field("engine", engine)
      .EndObject();
  return line.text() + "\n";
}

// Only findings that can change what the program computes on Trainium are logged: int64
// narrowing where values leave the int32 range, or every one when asked. The report file gets
// every finding, so `check` lists them all.
bool ChangesResults(const CompatSettings& settings, const CompatFinding& f) {
  return f.fails_on_trainium || f.beyond_int32 || settings.strict_numerics;
}

// Strict mode fails what neuronx-cc rejects; it narrows int64 without failing.
bool Fatal(const CompatSettings& settings, const CompatFinding& f) {
  return settings.mode == CompatMode::kStrict && (f.fails_on_trainium || settings.strict_numerics);
}

}  // namespace

Status ReportCompatFindings(const CompatSettings& settings, const std::string& program_name,
                            const std::vector<CompatFinding>& findings, const std::string& engine) {
  if (settings.mode == CompatMode::kOff || findings.empty()) return Status::Ok();
  static std::mutex mutex;
  static std::set<std::string> logged;
  static int programs_reported = 0;
  std::lock_guard<std::mutex> lock(mutex);
  // Programs share names (the same function at other shapes), so each compilation gets an id.
  const std::string program_id = std::to_string(getpid()) + "-" + std::to_string(++programs_reported);
  if (!settings.report_path.empty()) {
    if (FILE* report = std::fopen(settings.report_path.c_str(), "a")) {
      for (const CompatFinding& f : findings) {
        const std::string line = ReportLine(program_name, program_id, f, engine);
        std::fputs(line.c_str(), report);
      }
      std::fclose(report);
    }
  }
  std::string errors;
  for (const CompatFinding& f : findings) {
    if (!ChangesResults(settings, f)) continue;
    const bool fatal = Fatal(settings, f);
    if (fatal) errors += "\n  " + f.what + " at " + Location(f) + ": " + f.why + "; " + f.fix;
    if (fatal || !logged.insert(f.check + "@" + Location(f)).second) continue;
    const std::string what = f.what + (f.beyond_int32 ? " leaving the int32 range" : "");
    std::fprintf(stderr, "pjrt-neuron: Trainium %s: %s at %s: %s; %s\n",
                 f.fails_on_trainium ? "incompatibility" : "numeric difference", what.c_str(), Location(f).c_str(),
                 f.why.c_str(), f.fix.c_str());
  }
  if (errors.empty()) return Status::Ok();
  return InvalidArgument("'" + program_name + "' would not compile for Trainium (PJRT_NEURON_COMPAT=strict):" + errors);
}

}  // namespace pjrt_neuron::core
