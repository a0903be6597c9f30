// The arrays the C API hands out about a compiled program, built once and kept with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/common.h"
#include "api/view_cache.h"

namespace pjrt_neuron::api {

struct ExecutableViews {
  std::string name;
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims;  // all outputs' dimensions, concatenated
  std::vector<size_t> output_ranks;
  std::vector<std::string> memory_kind_strings;
  std::vector<const char*> memory_kinds;
  std::vector<size_t> memory_kind_sizes;
  Status fingerprint_status;
  std::string fingerprint;
  Status cost_analysis_status;
  std::unique_ptr<NamedValues> cost_analysis;
};

// Built on first use and kept while the program lives.
const ExecutableViews& ViewsOf(const std::shared_ptr<core::CompiledProgram>& program);

}  // namespace pjrt_neuron::api
