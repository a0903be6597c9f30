// The NRT_STATUS table (nrt_status.h).
#include "engine/neuron/nrt_status.h"

namespace pjrt_neuron::engine::neuron {
namespace {

// Numbers from the contract. Codes: bad input is the caller's; HBM/NeuronCore exhaustion is
// RESOURCE_EXHAUSTED; a busy or full queue may clear (UNAVAILABLE); hardware and runtime
// faults are INTERNAL. Nothing maps to UNKNOWN: core turns UNKNOWN compile failures into
// INVALID_ARGUMENT, which the compile cache would remember.
constexpr NrtStatusInfo kTable[] = {
    {0, "SUCCESS", ErrorCode::kOk, ""},
    {1, "FAILURE", ErrorCode::kInternal, "the runtime failed; NEURON_RT_LOG_LEVEL=INFO says why"},
    {2, "INVALID", ErrorCode::kInvalidArgument, "the runtime refused an argument"},
    {3, "INVALID_HANDLE", ErrorCode::kInternal, "a runtime handle was not valid"},
    {4, "RESOURCE", ErrorCode::kResourceExhausted, "the NeuronCore's memory is full"},
    {5, "TIMEOUT", ErrorCode::kDeadlineExceeded, "NEURON_RT_EXEC_TIMEOUT sets the limit"},
    {6, "HW_ERROR", ErrorCode::kInternal, "a hardware error; the core may need a reset"},
    {7, "QUEUE_FULL", ErrorCode::kUnavailable, "too many executions are queued on the core"},
    {9, "LOAD_NOT_ENOUGH_NC", ErrorCode::kResourceExhausted, "not enough free NeuronCores for the model"},
    {10, "UNSUPPORTED_NEFF_VERSION", ErrorCode::kFailedPrecondition,
     "neuronx-cc and the runtime are of different Neuron SDK releases"},
    {13, "UNINITIALIZED", ErrorCode::kFailedPrecondition, "the runtime is not initialised"},
    {14, "CLOSED", ErrorCode::kFailedPrecondition, "the runtime was closed"},
    {101, "EXEC_UNIT_UNRECOVERABLE", ErrorCode::kInternal, "the core cannot run anything more; it needs a reset"},
    {1002, "EXEC_BAD_INPUT", ErrorCode::kInvalidArgument, "an input tensor does not match the model"},
    {1003, "EXEC_COMPLETED_WITH_NUM_ERR", ErrorCode::kOk, "the results contain NaN or Inf"},
    {1004, "EXEC_COMPLETED_WITH_ERR", ErrorCode::kInternal, "the execution completed with errors"},
    {1005, "EXEC_NC_BUSY", ErrorCode::kUnavailable, "the core is busy (another process uses it?)"},
    {1006, "EXEC_OOB", ErrorCode::kOutOfRange, "an access was out of bounds (an index input out of range?)"},
    {1100, "COLL_PENDING", ErrorCode::kUnavailable, "a collective is still pending on another rank"},
    {1200, "EXEC_HW_ERR_COLLECTIVES", ErrorCode::kInternal, "a hardware error in a collective"},
    {1201, "EXEC_HW_ERR_HBM_UE", ErrorCode::kInternal, "an uncorrectable HBM error"},
    {1202, "EXEC_HW_ERR_NC_UE", ErrorCode::kInternal, "an uncorrectable NeuronCore error"},
    {1203, "EXEC_HW_ERR_DMA_ABORT", ErrorCode::kInternal, "a DMA transfer was aborted"},
    {1204, "EXEC_SW_NQ_OVERFLOW", ErrorCode::kInternal, "the runtime's notification queue overflowed"},
    {1205, "EXEC_HW_ERR_REPAIRABLE_HBM_UE", ErrorCode::kInternal,
     "a repairable HBM error; the instance needs a reboot to repair it"},
    {1206, "NETWORK_PROXY_FAILURE", ErrorCode::kInternal, "the collectives' network proxy failed"},
};

}  // namespace

NrtStatusInfo LookupNrtStatus(NrtStatus status) {
  for (const NrtStatusInfo& info : kTable) {
    if (info.status == status) return info;
  }
  return {status, "UNKNOWN", ErrorCode::kInternal, "a status this plugin does not know"};
}

bool ExecutionSucceeded(NrtStatus status) { return LookupNrtStatus(status).code == ErrorCode::kOk; }

Status NrtError(const char* call, NrtStatus status, int core, const std::string& detail, const char* runtime_text) {
  const NrtStatusInfo info = LookupNrtStatus(status);
  std::string message = std::string(call);
  if (core >= 0) message += " on NeuronCore " + std::to_string(core);
  message += " failed: NRT_" + std::string(info.name) + " (" + std::to_string(status) + ")";
  if (runtime_text != nullptr && *runtime_text != '\0') message += " \"" + std::string(runtime_text) + "\"";
  if (!detail.empty()) message += " " + detail;
  if (*info.hint != '\0') message += "; " + std::string(info.hint);
  // A success code cannot be an error: a caller that got here treats the status as failed.
  return Status(info.code == ErrorCode::kOk ? ErrorCode::kInternal : info.code, message);
}

}  // namespace pjrt_neuron::engine::neuron
