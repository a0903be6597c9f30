// Serialized topologies, as frameworks hand them back to PJRT_TopologyDescription_Deserialize.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/topology.h"

namespace core = pjrt_neuron::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto topology = core::DeserializeTopology(bytes);
  if (!topology.ok()) return 0;
  // What was accepted serializes to bytes that read back as the same instance.
  const std::string again = core::SerializeTopology(**topology);
  auto reread = core::DeserializeTopology(again);
  if (!reread.ok() || core::SerializeTopology(**reread) != again ||
      (*reread)->descriptions().size() != (*topology)->descriptions().size()) {
    std::abort();
  }
  return 0;
}
