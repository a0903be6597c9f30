// The plugin attributes (plugin_attributes.h): the engine's, and the plugin's version.
#include "core/plugin_attributes.h"

#include <string>

#include "common/settings.h"
#include "common/version.h"
#include "engine/factory.h"

namespace pjrt_neuron::core {

StatusOr<engine::Attributes> PluginAttributes() {
  // From the environment: frameworks ask before any create option exists.
  PN_ASSIGN_OR_RETURN(engine::Attributes attributes,
                      engine::EnginePluginAttributes(settings::Text(settings::Id::kEngineLibrary)));
  attributes.push_back({"pjrt_neuron_version", std::string(PluginVersion())});
  return attributes;
}

engine::Attributes EngineReport(bool with_memory) { return engine::DescribeEngine(with_memory); }

}  // namespace pjrt_neuron::core
