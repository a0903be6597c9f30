// The simulated host and the runtime's environment variables, each parsed once and strictly.
#include "settings.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nrt_api.h"

namespace standin {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Sizes: the stand-in's own codes (the contract gives none): 0 xlarge, 1 2xlarge,
// 2 3xlarge, 3 8xlarge, 4 24xlarge, 5 32xlarge, 6 48xlarge.
constexpr InstanceType kInstanceTypes[] = {
    {"trn1.2xlarge", NRT_INSTANCE_FAMILY_TRN1, 1, 2, 16 * kGiB, false},
    {"trn1.32xlarge", NRT_INSTANCE_FAMILY_TRN1, 5, 32, 16 * kGiB, false},
    {"trn1n.32xlarge", NRT_INSTANCE_FAMILY_TRN1N, 5, 32, 16 * kGiB, false},
    {"trn2.3xlarge", NRT_INSTANCE_FAMILY_TRN2, 2, 8, 12 * kGiB, true},
    {"trn2.48xlarge", NRT_INSTANCE_FAMILY_TRN2, 6, 128, 12 * kGiB, true},
    {"inf2.xlarge", NRT_INSTANCE_FAMILY_INF2, 0, 2, 16 * kGiB, false},
    {"inf2.8xlarge", NRT_INSTANCE_FAMILY_INF2, 3, 2, 16 * kGiB, false},
    {"inf2.24xlarge", NRT_INSTANCE_FAMILY_INF2, 4, 12, 16 * kGiB, false},
    {"inf2.48xlarge", NRT_INSTANCE_FAMILY_INF2, 6, 24, 16 * kGiB, false},
};

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

std::string Bad(const char* name, const std::string& value, const std::string& why) {
  return std::string(name) + "='" + value + "': " + why;
}

bool ParseUnsigned(const std::string& text, uint64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  *value = std::strtoull(text.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

bool ParseSeconds(const std::string& text, double* value) {
  errno = 0;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return !text.empty() && errno == 0 && *end == '\0' && *value > 0;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// "3", "3,4", "3-4" or a mix; the cores must be contiguous and ascending.
bool ParseVisibleCores(const std::string& text, uint32_t total, CoreRequest* request,
                       std::string* why) {
  std::vector<uint64_t> cores;
  for (const std::string& part : Split(text, ',')) {
    std::vector<std::string> bounds = Split(part, '-');
    uint64_t low = 0, high = 0;
    if (bounds.size() > 2 || !ParseUnsigned(bounds[0], &low) ||
        !ParseUnsigned(bounds.back(), &high) || high < low) {
      *why = "expected core numbers or ranges such as 0-3, separated by commas";
      return false;
    }
    for (uint64_t core = low; core <= high; ++core) cores.push_back(core);
  }
  for (size_t i = 1; i < cores.size(); ++i) {
    if (cores[i] != cores[i - 1] + 1) {
      *why = "the cores must be contiguous";
      return false;
    }
  }
  if (cores.back() >= total) {
    *why = "core " + std::to_string(cores.back()) + " does not exist (this instance has " +
           std::to_string(total) + ")";
    return false;
  }
  request->kind = CoreRequest::Kind::kRange;
  request->first = static_cast<uint32_t>(cores.front());
  request->count = static_cast<uint32_t>(cores.size());
  return true;
}

}  // namespace

uint32_t Settings::RequestedVncCount() const {
  return cores.kind == CoreRequest::Kind::kAll ? total_vncs : cores.count;
}

bool ReadHostSettings(Settings* s, std::string* error) {
  std::string instance = Env("NEURON_STANDIN_INSTANCE") ? Env("NEURON_STANDIN_INSTANCE")
                                                         : "trn1.2xlarge";
  const InstanceType* found = nullptr;
  for (const InstanceType& type : kInstanceTypes) {
    if (instance == type.name) found = &type;
  }
  if (!found) {
    std::string known;
    for (const InstanceType& type : kInstanceTypes) known += std::string(" ") + type.name;
    *error = Bad("NEURON_STANDIN_INSTANCE", instance, "unknown; known:" + known);
    return false;
  }
  s->instance = *found;

  s->lnc = found->supports_lnc2 ? 2 : 1;
  if (const char* lnc = Env("NEURON_LOGICAL_NC_CONFIG")) {
    std::string text = lnc;
    if (text != "1" && text != "2") {
      *error = Bad("NEURON_LOGICAL_NC_CONFIG", text, "must be 1 or 2");
      return false;
    }
    if (text == "2" && !found->supports_lnc2) {
      *error = Bad("NEURON_LOGICAL_NC_CONFIG", text,
                   std::string(found->name) + " has no logical NeuronCores of 2");
      return false;
    }
    s->lnc = text == "2" ? 2 : 1;
  }

  s->physical_cores = found->physical_cores;
  if (const char* cores = Env("NEURON_STANDIN_CORES")) {
    uint64_t value = 0;
    if (!ParseUnsigned(cores, &value) || value == 0 || value > 1024 || value % s->lnc != 0) {
      *error = Bad("NEURON_STANDIN_CORES", cores,
                   "must be a count of physical NeuronCores, 1..1024, a multiple of the LNC (" +
                       std::to_string(s->lnc) + ")");
      return false;
    }
    s->physical_cores = static_cast<uint32_t>(value);
  }
  s->total_vncs = s->physical_cores / s->lnc;

  s->hbm_per_vnc = found->hbm_per_physical_core * s->lnc;
  if (const char* hbm = Env("NEURON_STANDIN_HBM_BYTES")) {
    uint64_t value = 0;
    if (!ParseUnsigned(hbm, &value) || value == 0) {
      *error = Bad("NEURON_STANDIN_HBM_BYTES", hbm, "must be a positive byte count");
      return false;
    }
    s->hbm_per_vnc = value;
  }

  // NEURON_RT_VISIBLE_CORES wins over NEURON_RT_NUM_CORES.
  s->cores = CoreRequest{};
  if (const char* visible = Env("NEURON_RT_VISIBLE_CORES")) {
    std::string why;
    if (!ParseVisibleCores(visible, s->total_vncs, &s->cores, &why)) {
      *error = Bad("NEURON_RT_VISIBLE_CORES", visible, why);
      return false;
    }
  } else if (const char* count = Env("NEURON_RT_NUM_CORES")) {
    uint64_t value = 0;
    if (!ParseUnsigned(count, &value) || value == 0 || value > s->total_vncs) {
      *error = Bad("NEURON_RT_NUM_CORES", count,
                   "must be 1.." + std::to_string(s->total_vncs) + " on this instance");
      return false;
    }
    s->cores.kind = CoreRequest::Kind::kCount;
    s->cores.count = static_cast<uint32_t>(value);
  }
  return true;
}

bool ReadSettings(Settings* s, std::string* error) {
  if (!ReadHostSettings(s, error)) return false;

  const char* lock_dir = Env("NEURON_STANDIN_LOCK_DIR");
  if (!lock_dir) {
    // No shared default: two test sessions must never fight over one simulated host.
    *error = "NEURON_STANDIN_LOCK_DIR is not set (the directory of this host's core locks)";
    return false;
  }
  s->lock_dir = lock_dir;

  const char* plugin = Env("NEURON_STANDIN_XLA_CPU_PLUGIN");
  if (!plugin) {
    *error = "NEURON_STANDIN_XLA_CPU_PLUGIN is not set (the path of xla_cpu_pjrt.so)";
    return false;
  }
  s->xla_cpu_plugin = plugin;

  s->root_comm_id = Env("NEURON_RT_ROOT_COMM_ID") ? Env("NEURON_RT_ROOT_COMM_ID") : "";

  s->exec_timeout_seconds = 30.0;
  if (const char* timeout = Env("NEURON_RT_EXEC_TIMEOUT")) {
    if (!ParseSeconds(timeout, &s->exec_timeout_seconds)) {
      *error = Bad("NEURON_RT_EXEC_TIMEOUT", timeout, "must be a positive number of seconds");
      return false;
    }
  }

  s->exec_delay_ms = 0;
  if (const char* delay = Env("NEURON_STANDIN_EXEC_DELAY_MS")) {
    if (!ParseUnsigned(delay, &s->exec_delay_ms)) {
      *error = Bad("NEURON_STANDIN_EXEC_DELAY_MS", delay, "must be a whole number of ms");
      return false;
    }
  }

  s->report_numerical_errors = false;
  if (const char* numerical = Env("NEURON_STANDIN_NUMERICAL_ERRORS")) {
    std::string text = numerical;
    if (text != "0" && text != "1") {
      *error = Bad("NEURON_STANDIN_NUMERICAL_ERRORS", text, "must be 0 or 1");
      return false;
    }
    s->report_numerical_errors = text == "1";
  }
  return true;
}

}  // namespace standin
