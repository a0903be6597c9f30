#include "core/plugin_attributes.h"

#include <cstdlib>
#include <string>

#include "common/version.h"
#include "engine/factory.h"

namespace pjrt_neuron::core {

StatusOr<engine::Attributes> PluginAttributes() {
  // From the environment: frameworks ask before any create option exists.
  const char* library = std::getenv("PJRT_NEURON_ENGINE_LIBRARY");
  PN_ASSIGN_OR_RETURN(engine::Attributes attributes, engine::EnginePluginAttributes(library ? library : ""));
  attributes.push_back({"pjrt_neuron_version", std::string(PluginVersion())});
  return attributes;
}

}  // namespace pjrt_neuron::core
