// The environment's settings checked (settings_check.h): common/settings.h judges the syntax,
// the instance table and the core-list parser judge what only the core knows.
#include "core/settings_check.h"

#include <algorithm>

#include "common/settings.h"
#include "core/core_selection.h"
#include "core/instance.h"

namespace pjrt_neuron::core {
namespace {

// The largest instance's cores, so a list is judged before any instance is chosen.
int MostCores() {
  int most = 0;
  for (const InstanceType& t : KnownInstanceTypes()) {
    most = std::max(most, t.chips * t.physical_cores_per_chip);
  }
  return most;
}

Status CheckOne(const settings::Setting& setting) {
  const std::optional<std::string> value = settings::Raw(setting.id);
  if (!value.has_value()) return Status::Ok();
  PN_RETURN_IF_ERROR(settings::Check(setting, *value));
  if (setting.kind == settings::Kind::kInstanceType && FindInstanceType(*value) == nullptr) {
    return InvalidArgument(std::string(setting.name) + "='" + *value + "' is not a known instance type; use one of " +
                           KnownInstanceTypeNames());
  }
  if (setting.kind == settings::Kind::kCoreList) return ParseVisibleCores(*value, MostCores()).status();
  return Status::Ok();
}

}  // namespace

Status CheckSettings(const std::vector<std::string>& names) {
  if (names.empty()) {
    for (const settings::Setting& setting : settings::Table()) PN_RETURN_IF_ERROR(CheckOne(setting));
    return Status::Ok();
  }
  for (const std::string& name : names) {
    const settings::Setting* setting = settings::Find(name);
    if (setting == nullptr) return InvalidArgument("'" + name + "' is not a pjrt-neuron setting");
    PN_RETURN_IF_ERROR(CheckOne(*setting));
  }
  return Status::Ok();
}

}  // namespace pjrt_neuron::core
