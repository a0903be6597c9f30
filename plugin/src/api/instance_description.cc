// PjrtNeuron_DescribeInstance: the instance table and who holds which core, as JSON, so the
// `pjrt-neuron ls` command reads the one table in the plugin instead of keeping its own.
#include <cstring>
#include <string>

#include "core/core_selection.h"
#include "core/instance.h"

namespace pjrt_neuron::api {
namespace {

std::string Quoted(const std::string& text) { return "\"" + text + "\""; }

std::string IntList(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

std::string Describe(const core::InstanceShape& shape) {
  const core::InstanceType& type = *shape.type;
  std::vector<core::CoreHolder> holders = core::CoreHolders(type.name, shape.total_cores());
  std::string json = "{\"instance_type\":" + Quoted(type.name) +
                     ",\"logical_nc_config\":" + std::to_string(shape.logical_nc_config) +
                     ",\"core_generation\":" + Quoted(type.core_generation) +
                     ",\"total_cores\":" + std::to_string(shape.total_cores()) +
                     ",\"hbm_bytes_per_core\":" + std::to_string(shape.hbm_bytes_per_core) +
                     ",\"chip_links\":" +
                     Quoted(type.links == core::ChipLinks::kTorus2D ? "2d-torus"
                            : type.links == core::ChipLinks::kRing ? "ring" : "none") +
                     ",\"lock_directory\":" + Quoted(core::LockDirectory(type.name)) + ",\"chips\":[";
  for (int chip = 0; chip < type.chips; ++chip) {
    std::vector<int> cores;
    std::string held = "[";
    for (int core = chip * shape.cores_per_chip; core < (chip + 1) * shape.cores_per_chip; ++core) {
      cores.push_back(core);
      if (holders[core].pid != 0) {
        held += std::string(held.size() > 1 ? "," : "") + "{\"core\":" + std::to_string(core) +
                ",\"pid\":" + std::to_string(holders[core].pid) + "}";
      }
    }
    json += std::string(chip ? "," : "") + "{\"chip\":" + std::to_string(chip) +
            ",\"cores\":" + std::to_string(shape.cores_per_chip) + ",\"core_ids\":" + IntList(cores) +
            ",\"memory_bytes\":" + std::to_string(type.hbm_bytes_per_chip) +
            ",\"coordinates\":" + IntList(shape.chip_coordinates(chip)) +
            ",\"connected_chips\":" + IntList(shape.connected_chips(chip)) + ",\"holders\":" + held + "]}";
  }
  return json + "]}";
}

}  // namespace
}  // namespace pjrt_neuron::api

// Writes the description of `instance_type` (logical NeuronCore config `lnc`, 0 for the
// default) into `out`; returns the length needed, or -1 with the error message in `out`.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_DescribeInstance(const char* instance_type, int lnc,
                                                                                   char* out, size_t out_size) {
  auto shape = pjrt_neuron::core::ShapeInstance(instance_type ? instance_type : "", lnc);
  std::string text = shape.ok() ? pjrt_neuron::api::Describe(shape.value()) : shape.status().message();
  if (out != nullptr && out_size > 0) {
    size_t n = std::min(text.size(), out_size - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return shape.ok() ? static_cast<long>(text.size()) : -1;
}
