// PjrtNeuron_CompileCacheMetrics and PjrtNeuron_PrecompileProgram: this process's compile-cache
// counters as JSON, and compiling one recorded program into the cache, for Python.
#include "exports/text_out.h"
#include "core/compile_cache.h"
#include "core/precompile.h"

// Writes the JSON into `out`; returns the length needed.
extern "C" __attribute__((visibility("default"))) long PjrtNeuron_CompileCacheMetrics(char* out, size_t out_size) {
  return pjrt_neuron::exports::CopyToCaller(pjrt_neuron::core::MetricsJson(), out, out_size);
}

// Compiles one program recorded by graph collection into the compile cache.
// Returns 0 when compiled, 1 when it was cached already, -1 with the error in `message`.
extern "C" __attribute__((visibility("default"))) int PjrtNeuron_PrecompileProgram(const char* record_path,
                                                                                  char* message, size_t size) {
  auto result = pjrt_neuron::core::PrecompileRecord(record_path != nullptr ? record_path : "");
  pjrt_neuron::exports::CopyToCaller(result.ok() ? "" : result.status().message(), message, size);
  if (!result.ok()) return -1;
  return result.value() == pjrt_neuron::core::PrecompileResult::kCompiled ? 0 : 1;
}
