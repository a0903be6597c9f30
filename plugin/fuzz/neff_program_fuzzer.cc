// The Trainium engine's serialized executables (engine/neuron/neff_program.h), as they come
// back from PJRT_Executable_DeserializeAndLoad or the compile cache: whatever the bytes,
// reading them must not crash, and what reads must write back to bytes that read the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/neuron/neff_program.h"

namespace neuron = pjrt_neuron::engine::neuron;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto program = neuron::DeserializeNeffProgram(std::string(reinterpret_cast<const char*>(data), size));
  if (!program.ok()) return 0;
  const std::string again = neuron::SerializeNeffProgram(program.value());
  auto reread = neuron::DeserializeNeffProgram(again);
  if (!reread.ok() || neuron::SerializeNeffProgram(reread.value()) != again) std::abort();
  return 0;
}
