// PjrtNeuron_CompileCacheMetrics: this process's compile-cache counters as JSON, for Python.
#include <algorithm>
#include <cstring>

#include "core/compile_cache.h"
#include "core/precompile.h"

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

// Compiles one program recorded by graph collection into the compile cache.
// Returns 0 when compiled, 1 when it was cached already, -1 with the error in `message`.
extern "C" __attribute__((visibility("default"))) int PjrtNeuron_PrecompileProgram(const char* record_path,
                                                                                  char* message, size_t size) {
  auto result = pjrt_neuron::core::PrecompileRecord(record_path != nullptr ? record_path : "");
  std::string text = result.ok() ? "" : result.status().message();
  if (message != nullptr && size > 0) {
    size_t n = std::min(text.size(), size - 1);
    std::memcpy(message, text.data(), n);
    message[n] = '\0';
  }
  if (!result.ok()) return -1;
  return result.value() == pjrt_neuron::core::PrecompileResult::kCompiled ? 0 : 1;
}
