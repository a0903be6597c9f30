// XLA's CPU PJRT plugin (the xla-cpu-pjrt wheel, or another engine build) as a library: loaded
// once per path and called at its own PJRT version, with full-size argument structs.
#pragma once

#include <cstring>
#include <string>

#include "common/status.h"
#include "pjrt_c_api.h"

// Declares `var`, an engine call's argument struct: zeroed, with the engine's struct size.
#define INNER_ARGS(type, var) \
  type var;                   \
  std::memset(&var, 0, sizeof(var)); \
  var.struct_size = type##_STRUCT_SIZE

namespace pjrt_neuron::engine::sim {

// Turns an inner PJRT_Error into a Status and frees it.
Status TakeError(const PJRT_Api* api, PJRT_Error* error);

// Loads and initialises the engine library at `requested_path` (empty: the wheel beside our
// package) once per process; later calls reuse it.
StatusOr<const PJRT_Api*> LoadApi(const std::string& requested_path);

}  // namespace pjrt_neuron::engine::sim
