// PJRT_Error: our errors carry a Status; these three calls never fail themselves.
#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

void Error_Destroy(PJRT_Error_Destroy_Args* args) {
  if (args == nullptr || !PN_HAS(args, PJRT_Error_Destroy_Args, error)) return;
  delete args->error;
}

void Error_Message(PJRT_Error_Message_Args* args) {
  if (args == nullptr || !PN_HAS(args, PJRT_Error_Message_Args, message_size)) return;
  if (args->error == nullptr) {
    args->message = "";
    args->message_size = 0;
    return;
  }
  const std::string& message = args->error->status.message();
  args->message = message.c_str();
  args->message_size = message.size();
}

PN_ENTRY(Error_GetCode) {
  PN_REQUIRE_ARGS(args, PJRT_Error_GetCode_Args, code);
  if (args->error == nullptr) return InvalidArgument("`error` is null");
  args->code = static_cast<PJRT_Error_Code>(args->error->status.code());
  return Status::Ok();
}

}  // namespace

void BindErrors(PJRT_Api* api) {
  api->PJRT_Error_Destroy = Error_Destroy;
  api->PJRT_Error_Message = Error_Message;
  api->PJRT_Error_GetCode = Error_GetCode;
}

}  // namespace pjrt_neuron::api
