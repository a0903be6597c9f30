// Reports the compatibility analysis's findings (hlo/compat_analysis.h): logs each once per
// process, appends them to the report file and, in strict mode, fails the compilation.
#include "core/compat_report.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace pjrt_neuron::core {

using hlo::CompatFinding;

StatusOr<CompatSettings> ReadCompatSettings() {
  CompatSettings settings;
  const char* mode = std::getenv("PJRT_NEURON_COMPAT");
  std::string value = mode != nullptr ? mode : "";
  if (value.empty() || value == "warn") {
    settings.mode = CompatMode::kWarn;
  } else if (value == "strict") {
    settings.mode = CompatMode::kStrict;
  } else if (value == "off") {
    settings.mode = CompatMode::kOff;
  } else {
    return InvalidArgument("PJRT_NEURON_COMPAT='" + value + "'; use warn (the default), strict or off");
  }
  const char* numerics = std::getenv("PJRT_NEURON_COMPAT_STRICT_NUMERICS");
  settings.strict_numerics = numerics != nullptr && std::string(numerics) == "1";
  const char* report = std::getenv("PJRT_NEURON_COMPAT_REPORT");
  if (report != nullptr) settings.report_path = report;
  return settings;
}

namespace {

std::string Location(const CompatFinding& f) {
  if (f.source_file.empty()) return f.op_name.empty() ? "(no source location)" : f.op_name;
  return f.source_file + ":" + std::to_string(f.source_line) + (f.op_name.empty() ? "" : " (" + f.op_name + ")");
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool Fatal(const CompatSettings& settings, const CompatFinding& f) {
  return f.fails_on_trainium || settings.strict_numerics;
}

}  // namespace

Status ReportCompatFindings(const CompatSettings& settings, const std::string& program_name,
                            const std::vector<CompatFinding>& findings) {
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
        std::string line = "{\"program\":" + JsonString(program_name) + ",\"program_id\":" + JsonString(program_id) +
                           ",\"check\":" + JsonString(f.check) +
                           ",\"what\":" + JsonString(f.what) + ",\"why\":" + JsonString(f.why) +
                           ",\"fix\":" + JsonString(f.fix) +
                           ",\"fails_on_trainium\":" + (f.fails_on_trainium ? "true" : "false") +
                           ",\"op_name\":" + JsonString(f.op_name) + ",\"source_file\":" + JsonString(f.source_file) +
                           ",\"source_line\":" + std::to_string(f.source_line) + ",\"count\":" + std::to_string(f.count) +
                           "}\n";
        std::fputs(line.c_str(), report);
      }
      std::fclose(report);
    }
  }
  std::string errors;
  for (const CompatFinding& f : findings) {
    const bool fatal = settings.mode == CompatMode::kStrict && Fatal(settings, f);
    if (fatal) errors += "\n  " + f.what + " at " + Location(f) + ": " + f.why + "; " + f.fix;
    if (fatal || !logged.insert(f.check + "@" + Location(f)).second) continue;
    std::fprintf(stderr, "pjrt-neuron: Trainium %s: %s at %s: %s; %s\n",
                 f.fails_on_trainium ? "incompatibility" : "numeric difference", f.what.c_str(), Location(f).c_str(),
                 f.why.c_str(), f.fix.c_str());
  }
  if (errors.empty()) return Status::Ok();
  return InvalidArgument("'" + program_name + "' would not compile for Trainium (PJRT_NEURON_COMPAT=strict):" + errors);
}

}  // namespace pjrt_neuron::core
