// engine/neuron/nrt_status: each NRT_STATUS of the contract has a deliberate PJRT code, and
// every message names the call, the status name and number, and the core.
#include "engine/neuron/nrt_status.h"

#include <gtest/gtest.h>

namespace pjrt_neuron::engine::neuron {
namespace {

struct Expected {
  NrtStatus status;
  const char* name;
  ErrorCode code;
};

// The contract's list, with the code each must become.
constexpr Expected kContract[] = {
    {1, "FAILURE", ErrorCode::kInternal},
    {2, "INVALID", ErrorCode::kInvalidArgument},
    {3, "INVALID_HANDLE", ErrorCode::kInternal},
    {4, "RESOURCE", ErrorCode::kResourceExhausted},
    {5, "TIMEOUT", ErrorCode::kDeadlineExceeded},
    {6, "HW_ERROR", ErrorCode::kInternal},
    {7, "QUEUE_FULL", ErrorCode::kUnavailable},
    {9, "LOAD_NOT_ENOUGH_NC", ErrorCode::kResourceExhausted},
    {10, "UNSUPPORTED_NEFF_VERSION", ErrorCode::kFailedPrecondition},
    {13, "UNINITIALIZED", ErrorCode::kFailedPrecondition},
    {14, "CLOSED", ErrorCode::kFailedPrecondition},
    {101, "EXEC_UNIT_UNRECOVERABLE", ErrorCode::kInternal},
    {1002, "EXEC_BAD_INPUT", ErrorCode::kInvalidArgument},
    {1004, "EXEC_COMPLETED_WITH_ERR", ErrorCode::kInternal},
    {1005, "EXEC_NC_BUSY", ErrorCode::kUnavailable},
    {1006, "EXEC_OOB", ErrorCode::kOutOfRange},
    {1100, "COLL_PENDING", ErrorCode::kUnavailable},
    {1200, "EXEC_HW_ERR_COLLECTIVES", ErrorCode::kInternal},
    {1201, "EXEC_HW_ERR_HBM_UE", ErrorCode::kInternal},
    {1202, "EXEC_HW_ERR_NC_UE", ErrorCode::kInternal},
    {1203, "EXEC_HW_ERR_DMA_ABORT", ErrorCode::kInternal},
    {1204, "EXEC_SW_NQ_OVERFLOW", ErrorCode::kInternal},
    {1205, "EXEC_HW_ERR_REPAIRABLE_HBM_UE", ErrorCode::kInternal},
    {1206, "NETWORK_PROXY_FAILURE", ErrorCode::kInternal},
};

TEST(NrtStatus, EveryContractStatusHasItsCode) {
  for (const Expected& e : kContract) {
    NrtStatusInfo info = LookupNrtStatus(e.status);
    EXPECT_STREQ(info.name, e.name) << e.status;
    EXPECT_EQ(info.code, e.code) << e.name;
    Status error = NrtError("nrt_execute", e.status, 1, "");
    EXPECT_EQ(error.code(), e.code) << e.name;
    EXPECT_NE(error.message().find(std::string("NRT_") + e.name + " (" + std::to_string(e.status) + ")"),
              std::string::npos)
        << error.message();
  }
}

TEST(NrtStatus, SuccessAndNumericalErrorsCountAsCompletedRuns) {
  EXPECT_TRUE(ExecutionSucceeded(0));
  EXPECT_TRUE(ExecutionSucceeded(1003));  // NaN/Inf in the results: XLA returns them too
  EXPECT_FALSE(ExecutionSucceeded(1004));
  EXPECT_FALSE(ExecutionSucceeded(4));
}

TEST(NrtStatus, MessageNamesCallCoreStatusAndRuntimeText) {
  Status error = NrtError("nrt_tensor_allocate", 4, 3, "for 64 bytes of HBM", "out of device memory");
  EXPECT_EQ(error.code(), ErrorCode::kResourceExhausted);
  const std::string& m = error.message();
  EXPECT_EQ(m.rfind("nrt_tensor_allocate on NeuronCore 3 failed: NRT_RESOURCE (4)", 0), 0u) << m;
  EXPECT_NE(m.find("out of device memory"), std::string::npos) << m;
  EXPECT_NE(m.find("for 64 bytes of HBM"), std::string::npos) << m;
}

TEST(NrtStatus, NoCoreNoCoreInTheMessage) {
  Status error = NrtError("nrt_init", 2, -1, "");
  EXPECT_EQ(error.message().rfind("nrt_init failed: NRT_INVALID (2)", 0), 0u) << error.message();
}

TEST(NrtStatus, UnknownStatusIsInternalNeverUnknown) {
  // UNKNOWN would become a remembered INVALID_ARGUMENT in the compile cache.
  Status error = NrtError("nrt_load", 4242, 0, "");
  EXPECT_EQ(error.code(), ErrorCode::kInternal);
  EXPECT_NE(error.message().find("NRT_UNKNOWN (4242)"), std::string::npos);
}

TEST(NrtStatus, ASuccessCodePassedAsAFailureIsStillAFailure) {
  EXPECT_FALSE(NrtError("nrt_execute", 0, 0, "").ok());
}

}  // namespace
}  // namespace pjrt_neuron::engine::neuron
