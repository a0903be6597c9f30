// What each NRT_STATUS means to a PJRT caller: one table, and the message every failed
// runtime call becomes (the call, the status name and number, the core, a hint).
#pragma once

#include <string>

#include "common/status.h"
#include "engine/neuron/nrt_api.h"

namespace pjrt_neuron::engine::neuron {

struct NrtStatusInfo {
  NrtStatus status;
  const char* name;  // as the contract spells it, without the NRT_ prefix
  ErrorCode code;
  const char* hint;  // what it usually means here; may be empty
};

// The table entry of `status`; an unknown status gets INTERNAL and the name "UNKNOWN".
NrtStatusInfo LookupNrtStatus(NrtStatus status);

// Statuses after which an execution's outputs are complete and usable.
bool ExecutionSucceeded(NrtStatus status);

// "nrt_execute on NeuronCore 1 failed: NRT_EXEC_BAD_INPUT (1002) ...". `core` < 0: none.
// `runtime_text` is what nrt_get_status_as_str said, when the runtime has it.
Status NrtError(const char* call, NrtStatus status, int core, const std::string& detail,
                const char* runtime_text = nullptr);

}  // namespace pjrt_neuron::engine::neuron
