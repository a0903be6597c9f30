// Instance shapes: a type's chips and links with its logical NeuronCore config applied.
#include "core/instance.h"

#include <algorithm>

namespace pjrt_neuron::core {

StatusOr<InstanceShape> ShapeInstance(const std::string& name, int logical_nc_config) {
  const InstanceType* type = FindInstanceType(name);
  if (type == nullptr) {
    return InvalidArgument("unknown instance type '" + name + "' (PJRT_NEURON_INSTANCE_TYPE or create option " +
                           "instance_type); known: " + KnownInstanceTypeNames());
  }
  InstanceShape shape;
  shape.type = type;
  shape.logical_nc_config = logical_nc_config == 0 ? type->default_logical_nc_config : logical_nc_config;
  if (shape.logical_nc_config < 1 || shape.logical_nc_config > type->max_logical_nc_config) {
    return InvalidArgument("NEURON_LOGICAL_NC_CONFIG=" + std::to_string(logical_nc_config) + " is not valid on " +
                           type->name + " (" + type->core_generation + "); allowed: 1" +
                           (type->max_logical_nc_config > 1 ? " or 2" : ""));
  }
  shape.cores_per_chip = type->physical_cores_per_chip / shape.logical_nc_config;
  shape.hbm_bytes_per_core = type->hbm_bytes_per_chip / shape.cores_per_chip;
  return shape;
}

std::vector<int> InstanceShape::chip_coordinates(int chip) const {
  if (type->links == ChipLinks::kTorus2D) return {chip % type->torus_width, chip / type->torus_width};
  return {chip};
}

std::vector<int> InstanceShape::connected_chips(int chip) const {
  std::vector<int> out;
  const int n = type->chips;
  if (type->links == ChipLinks::kRing && n > 1) {
    out = {(chip + n - 1) % n, (chip + 1) % n};
  } else if (type->links == ChipLinks::kTorus2D) {
    const int w = type->torus_width, h = n / w, x = chip % w, y = chip / w;
    out = {y * w + (x + w - 1) % w, y * w + (x + 1) % w, ((y + h - 1) % h) * w + x, ((y + 1) % h) * w + x};
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out.erase(std::remove(out.begin(), out.end(), chip), out.end());
  return out;
}

}  // namespace pjrt_neuron::core
