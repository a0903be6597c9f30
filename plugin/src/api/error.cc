// PJRT_Error: our errors carry a Status and the entry point that failed. Callers of 0.112 and
// later may read one through the function table that leads it instead of through PJRT_Api; both
// ways give the same answers. Reading never fails.
#include <cstring>

#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

constexpr char kFunctionPayloadKey[] = "pjrt_neuron.function";

void DestroyError(PJRT_Error* error) { delete error; }

void ErrorMessageOf(const PJRT_Error* error, const char** message, size_t* message_size) {
  if (error == nullptr) {
    *message = "";
    *message_size = 0;
    return;
  }
  *message = error->status.message().c_str();
  *message_size = error->status.message().size();
}

PJRT_Error_Code ErrorCodeOf(const PJRT_Error* error) {
  return error == nullptr ? static_cast<PJRT_Error_Code>(0) : static_cast<PJRT_Error_Code>(error->status.code());
}

void VisitPayloads(const PJRT_Error* error, PJRT_Error_PayloadVisitor visitor, void* user_arg) {
  if (error == nullptr || visitor == nullptr || error->function == nullptr) return;
  visitor(kFunctionPayloadKey, sizeof(kFunctionPayloadKey) - 1, error->function, std::strlen(error->function),
          user_arg);
}

constexpr PJRT_Error_FunctionTable kErrorFunctionTable = {
    PJRT_Error_FunctionTable_STRUCT_SIZE, sizeof(PJRT_Error), nullptr, DestroyError, ErrorMessageOf, ErrorCodeOf,
    VisitPayloads,
};

void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args == nullptr || !PN_HAS(args, PJRT_Error_Destroy_Args, error)) return;
  delete args->error;
}

void PJRT_Error_Message(PJRT_Error_Message_Args* args) {
  if (args == nullptr || !PN_HAS(args, PJRT_Error_Message_Args, message_size)) return;
  ErrorMessageOf(args->error, &args->message, &args->message_size);
}

PN_ENTRY(PJRT_Error_GetCode) {
  PN_REQUIRE_ARGS(args, PJRT_Error_GetCode_Args, code);
  if (args->error == nullptr) return InvalidArgument("`error` is null");
  args->code = ErrorCodeOf(args->error);
  return Status::Ok();
}

PN_ENTRY(PJRT_Error_ForEachPayload) {
  PN_REQUIRE_ARGS(args, PJRT_Error_ForEachPayload_Args, user_arg);
  if (args->error == nullptr) return InvalidArgument("`error` is null");
  if (args->visitor == nullptr) return InvalidArgument("`visitor` is null");
  VisitPayloads(args->error, args->visitor, args->user_arg);
  return Status::Ok();
}

}  // namespace

}  // namespace pjrt_neuron::api

PJRT_Error::PJRT_Error(pjrt_neuron::Status status, const char* function)
    : function_table(&pjrt_neuron::api::kErrorFunctionTable), status(std::move(status)), function(function) {}

namespace pjrt_neuron::api {

Status TakeCallerError(PJRT_Error* error, const std::string& what) {
  if (error == nullptr) return Status::Ok();
  if (error->function_table == &kErrorFunctionTable) {
    Status status(error->status.code(), what + ": " + error->status.message());
    delete error;
    return status;
  }
  // A caller of 0.112 or later may hand back an error of its own making: read it through its table.
  const PJRT_Error_FunctionTable* table = error->function_table;
  if (table == nullptr || table->message == nullptr || table->get_code == nullptr || table->destroy == nullptr) {
    return Internal(what + ": failed with an error object that has no function table");
  }
  const char* message = nullptr;
  size_t message_size = 0;
  table->message(error, &message, &message_size);
  Status status(static_cast<ErrorCode>(table->get_code(error)), what + ": " + std::string(message, message_size));
  table->destroy(error);
  return status;
}

void BindErrors(PJRT_Api* api) {
  api->PJRT_Error_Destroy = PJRT_Error_Destroy;
  api->PJRT_Error_Message = PJRT_Error_Message;
  api->PJRT_Error_GetCode = PJRT_Error_GetCode;
}

void BindNewerErrors(PJRT_Api_Newer* api) { api->PJRT_Error_ForEachPayload = PJRT_Error_ForEachPayload; }

}  // namespace pjrt_neuron::api
