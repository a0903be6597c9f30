// Program bytes ("hlo" and "hlo_with_config"): what the plugin itself reads of a program before
// the engine sees it (collectives, compatibility findings, entry signature, NEFF names).
#include <cstddef>
#include <cstdint>
#include <string>

#include "hlo/collective_program.h"
#include "hlo/compat_analysis.h"
#include "hlo/neff_names.h"

namespace hlo = pjrt_neuron::hlo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const char* format : {"hlo", "hlo_with_config", "mlir"}) {
    (void)hlo::HasCollectives(bytes, format);
    bool matchable = false;
    (void)hlo::CollectiveSignature(bytes, format, &matchable);
  }
  (void)hlo::WithCollectiveChannels(bytes);
  for (bool with_config : {false, true}) (void)hlo::AnalyzeHloModule(bytes, with_config, true);
  (void)hlo::ReadEntrySignature(bytes);
  (void)hlo::WithNeffNames(bytes);
  return 0;
}
