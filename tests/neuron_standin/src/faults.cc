// Fault injection: NEURON_STANDIN_FAULT makes a chosen nrt call return a chosen status.
#include "faults.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>

namespace standin {
namespace {

// Every exported call that returns an NRT_STATUS; a spec naming anything else is a typo.
constexpr const char* kFaultableFunctions[] = {
    "nrt_init", "nrt_get_version", "nrt_get_visible_vnc_count", "nrt_get_total_vnc_count",
    "nrt_get_instance_info", "nrt_get_vnc_memory_stats", "nrt_load", "nrt_load_collectives",
    "nrt_unload", "nrt_get_model_tensor_info", "nrt_free_model_tensor_info",
    "nrt_tensor_allocate", "nrt_tensor_attach_buffer", "nrt_tensor_read", "nrt_tensor_write",
    "nrt_tensor_copy", "nrt_allocate_tensor_set", "nrt_add_tensor_to_tensor_set",
    "nrt_get_tensor_from_tensor_set", "nrt_execute",
};

bool ParseNumber(const std::string& text, uint64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  *value = std::strtoull(text.c_str(), nullptr, 10);
  return errno == 0;
}

}  // namespace

bool FaultPlan::Reset(const char* spec, std::string* error) {
  std::map<std::string, std::vector<Rule>> rules;
  std::string text = spec ? spec : "";
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    start = end + 1;
    size_t first = item.find(':');
    size_t second = first == std::string::npos ? first : item.find(':', first + 1);
    std::string why;
    Rule rule;
    std::string function = item.substr(0, first);
    std::string call = second == std::string::npos ? "" : item.substr(first + 1, second - first - 1);
    std::string status = second == std::string::npos ? "" : item.substr(second + 1);
    if (!call.empty() && call.back() == '+') {
      rule.and_later = true;
      call.pop_back();
    }
    uint64_t status_value = 0;
    if (second == std::string::npos || !ParseNumber(call, &rule.call) || rule.call == 0 ||
        !ParseNumber(status, &status_value) || status_value == 0 || status_value > 100000) {
      why = "expected function:call:status, call counted from 1 (k+ for k and later), "
            "status a non-zero NRT_STATUS";
    } else if (std::find_if(std::begin(kFaultableFunctions), std::end(kFaultableFunctions),
                            [&](const char* f) { return function == f; }) ==
               std::end(kFaultableFunctions)) {
      why = "'" + function + "' is not an nrt call that returns a status";
    }
    if (!why.empty()) {
      *error = "NEURON_STANDIN_FAULT='" + text + "': item '" + item + "': " + why;
      return false;
    }
    rule.status = static_cast<int>(status_value);
    rules[function].push_back(rule);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  rules_ = std::move(rules);
  calls_.clear();
  return true;
}

bool FaultPlan::Hit(const char* function, int* status, uint64_t* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t count = ++calls_[function];
  auto found = rules_.find(function);
  if (found == rules_.end()) return false;
  for (const Rule& rule : found->second) {
    if (count == rule.call || (rule.and_later && count > rule.call)) {
      *status = rule.status;
      *call = count;
      return true;
    }
  }
  return false;
}

}  // namespace standin
