// PjrtNeuron_CompileCacheMetrics: this process's compile-cache counters as JSON, for Python.
#include <algorithm>
#include <cstring>

#include "core/compile_cache.h"

// Writes the JSON into `out`; returns the length needed.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_CompileCacheMetrics(char* out, size_t out_size) {
  std::string text = pjrt_neuron::core::MetricsJson();
  if (out != nullptr && out_size > 0) {
    size_t n = std::min(text.size(), out_size - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<long>(text.size());
}
