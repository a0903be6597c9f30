// Compile-cache entries as read back from disk (another process, a crash or a full disk may
// have left anything there).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/compile_cache.h"

namespace core = pjrt_neuron::core;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  core::CacheEntry entry = core::ParseCacheEntry(bytes);
  // A valid entry's payload lies inside the bytes; an invalid one says why.
  if (entry.valid) {
    if (entry.payload_offset > bytes.size() || bytes.size() - entry.payload_offset != entry.payload_size ||
        !entry.problem.empty() || !entry.header_json) {
      std::abort();
    }
  } else if (entry.problem.empty()) {
    std::abort();
  }
  return 0;
}
