// The plugin's version, from the package metadata (pyproject.toml), handed in by the build.
#pragma once

namespace pjrt_neuron {

const char* PluginVersion();

}  // namespace pjrt_neuron
