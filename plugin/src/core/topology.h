// The instance as frameworks see it: one description per NeuronCore, with its chip, place in
// the chip links and HBM, and the topology's serialized form.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/instance.h"
#include "core/tagged.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class DeviceDescription : public Tagged<0x4e444453> {
 public:
  int id = 0;
  int process_index = 0;
  int chip = 0;
  int core_on_chip = 0;
  std::string kind;
  std::string to_string;
  std::string debug_string;
  engine::Attributes attributes;
};

class Topology : public Tagged<0x4e544f50> {
 public:
  // `instances` > 1: the instances of a multi-host job, each core numbered after the previous
  // instance's (the Trainium engine's jobs; the simulator's jobs share one instance).
  explicit Topology(const InstanceShape& shape, int instances = 1);
  const InstanceShape& shape() const { return shape_; }
  const InstanceType& instance() const { return *shape_.type; }
  const std::vector<std::unique_ptr<DeviceDescription>>& descriptions() const { return descriptions_; }
  const engine::Attributes& attributes() const { return attributes_; }
  bool owned_by_client = false;

 private:
  InstanceShape shape_;
  std::vector<std::unique_ptr<DeviceDescription>> descriptions_;
  engine::Attributes attributes_;
};

// A topology as bytes and back ("pjrt-neuron-topology/1 <instance> <logical NC config>").
std::string SerializeTopology(const Topology& topology);
StatusOr<std::unique_ptr<Topology>> DeserializeTopology(const std::string& bytes);

}  // namespace pjrt_neuron::core
