// Serialized compile options and device assignments, as callers send them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hlo/compile_options.h"

namespace hlo = pjrt_neuron::hlo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Device ids 0-7 exist (engine id = id + 1); the rest are refused, as a client does.
  hlo::DeviceIdMap map = [](int64_t id) -> pjrt_neuron::StatusOr<int64_t> {
    if (id < 0 || id > 7) return pjrt_neuron::InvalidArgument("no device " + std::to_string(id));
    return id + 1;
  };
  hlo::ReplicaLayout layout;
  const std::vector<int64_t> cores = {1, 2};
  (void)hlo::NormalizeCompileOptions(bytes, map, &layout);
  (void)hlo::NormalizeCompileOptions(bytes, map, &layout, &cores);
  (void)hlo::MapDeviceAssignment(bytes, map);
  return 0;
}
