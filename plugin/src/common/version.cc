// The plugin's version string, as the build defined it (version.h).
#include "common/version.h"

namespace pjrt_neuron {

const char* PluginVersion() { return PJRT_NEURON_VERSION; }

}  // namespace pjrt_neuron
