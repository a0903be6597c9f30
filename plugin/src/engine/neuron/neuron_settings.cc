// Reads the Neuron engine's settings (neuron_settings.h).
#include "engine/neuron/neuron_settings.h"

#include <cstdlib>

#include "engine/neuron/nrt_api.h"
#include "engine/neuron/subprocess.h"

namespace pjrt_neuron::engine::neuron {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

StatusOr<NeuronSettings> ReadNeuronSettings() {
  NeuronSettings settings;
  settings.nrt_library = Env("PJRT_NEURON_NRT_LIBRARY");
  if (settings.nrt_library.empty()) settings.nrt_library = kDefaultNrtLibrary;
  settings.neuronx_cc = Env("PJRT_NEURON_NEURONX_CC");
  if (settings.neuronx_cc.empty()) settings.neuronx_cc = "neuronx-cc";
  const std::string flags = Env("NEURON_CC_FLAGS");
  auto words = SplitShellWords(flags);
  if (!words.ok()) return InvalidArgument("NEURON_CC_FLAGS='" + flags + "': " + words.status().message());
  settings.cc_flags = std::move(words.value());
  if (std::string lnc = Env("NEURON_LOGICAL_NC_CONFIG"); !lnc.empty()) {
    if (lnc != "1" && lnc != "2") return InvalidArgument("NEURON_LOGICAL_NC_CONFIG='" + lnc + "'; use 1 or 2");
    settings.lnc = lnc[0] - '0';
  }
  if (std::string seconds = Env("PJRT_NEURON_COMPILE_PROGRESS_SECONDS"); !seconds.empty()) {
    char* end = nullptr;
    double value = std::strtod(seconds.c_str(), &end);
    if (*end != '\0' || !(value >= 0)) {
      return InvalidArgument("PJRT_NEURON_COMPILE_PROGRESS_SECONDS='" + seconds +
                             "' is not a non-negative number of seconds");
    }
    settings.progress_after_seconds = value;
  }
  settings.instance_type = Env("PJRT_NEURON_INSTANCE_TYPE");
  return settings;
}

}  // namespace pjrt_neuron::engine::neuron
