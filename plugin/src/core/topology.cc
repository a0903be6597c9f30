// Topologies: a description per core, and the topology's bytes.
#include "core/topology.h"

#include <algorithm>
#include <cstdio>

#include "core/sizes.h"

namespace pjrt_neuron::core {
namespace {

constexpr char kTopologyMagic[] = "pjrt-neuron-topology/1";

}  // namespace

Topology::Topology(const InstanceShape& shape, int instances) : shape_(shape) {
  const InstanceType& instance = *shape.type;
  for (int id = 0; id < shape.total_cores() * std::max(instances, 1); ++id) {
    const int host = id / shape.total_cores();
    const int core = id % shape.total_cores();
    auto d = std::make_unique<DeviceDescription>();
    d->id = id;
    d->chip = host * instance.chips + shape.chip_of(core);
    d->core_on_chip = core % shape.cores_per_chip;
    d->kind = instance.core_generation;
    d->to_string = "NeuronCore(id=" + std::to_string(id) + ", chip=" + std::to_string(d->chip) +
                   ", core=" + std::to_string(d->core_on_chip) + ")";
    d->debug_string = std::string(instance.core_generation) + " " + std::to_string(id) + " of " + instance.name +
                      " (chip " + std::to_string(d->chip) + ", core " + std::to_string(d->core_on_chip) + ", " +
                      FormatBytes(shape.hbm_bytes_per_core) + " HBM, simulated)";
    std::vector<int64_t> coords;
    for (int c : shape.chip_coordinates(shape.chip_of(core))) coords.push_back(c);
    // `coords` as TPU-style clients read it: the chip's (x, y, z) position, z always 0.
    std::vector<int64_t> xyz = coords;
    xyz.resize(3, 0);
    d->attributes = {
        {"coords", xyz},
        {"chip_index", int64_t{d->chip}},
        {"core_on_chip", int64_t{d->core_on_chip}},
        {"chip_coords", coords},
        {"hbm_bytes", shape.hbm_bytes_per_core},
        {"instance_type", std::string(instance.name)},
        {"logical_nc_config", int64_t{shape.logical_nc_config}},
    };
    if (instances > 1) d->attributes.push_back({"host_index", int64_t{host}});
    descriptions_.push_back(std::move(d));
  }
  attributes_ = {
      {"instance_type", std::string(instance.name)},
      {"chips", int64_t{instance.chips}},
      {"cores_per_chip", int64_t{shape.cores_per_chip}},
      {"logical_nc_config", int64_t{shape.logical_nc_config}},
      {"core_generation", std::string(instance.core_generation)},
      {"hbm_bytes_per_core", shape.hbm_bytes_per_core},
      {"chip_links", std::string(instance.links == ChipLinks::kTorus2D ? "2d-torus"
                                 : instance.links == ChipLinks::kRing ? "ring" : "none")},
  };
}

std::string SerializeTopology(const Topology& topology) {
  return std::string(kTopologyMagic) + " " + topology.instance().name + " " +
         std::to_string(topology.shape().logical_nc_config);
}

StatusOr<std::unique_ptr<Topology>> DeserializeTopology(const std::string& bytes) {
  char name[64] = {0};
  int lnc = 0;
  const std::string prefix = std::string(kTopologyMagic) + " ";
  if (bytes.compare(0, prefix.size(), prefix) != 0 ||
      std::sscanf(bytes.c_str() + prefix.size(), "%63s %d", name, &lnc) != 2) {
    return InvalidArgument("the bytes are not a pjrt-neuron topology (made by PJRT_TopologyDescription_Serialize)");
  }
  PN_ASSIGN_OR_RETURN(InstanceShape shape, ShapeInstance(name, lnc));
  return std::make_unique<Topology>(shape);
}

}  // namespace pjrt_neuron::core
