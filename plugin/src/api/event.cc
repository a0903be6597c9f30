// PJRT_Event: completion of transfers and executions, errors carried through.
#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

PN_ENTRY(PJRT_Event_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_Event_Destroy_Args, event);
  PN_ASSIGN_OR_RETURN(core::Event * event, (Unwrap<core::Event>(args->event, "event")));
  delete event;
  return Status::Ok();
}

PN_ENTRY(PJRT_Event_IsReady) {
  PN_REQUIRE_ARGS(args, PJRT_Event_IsReady_Args, is_ready);
  PN_ASSIGN_OR_RETURN(core::Event * event, (Unwrap<core::Event>(args->event, "event")));
  args->is_ready = event->IsReady();
  return Status::Ok();
}

// The event's own failure is this call's error, per the PJRT contract.
PN_ENTRY(PJRT_Event_Error) {
  PN_REQUIRE_ARGS(args, PJRT_Event_Error_Args, event);
  PN_ASSIGN_OR_RETURN(core::Event * event, (Unwrap<core::Event>(args->event, "event")));
  if (!event->IsReady()) return FailedPrecondition("the event is not ready yet; await it first");
  return event->Await();
}

PN_ENTRY(PJRT_Event_Await) {
  PN_REQUIRE_ARGS(args, PJRT_Event_Await_Args, event);
  PN_ASSIGN_OR_RETURN(core::Event * event, (Unwrap<core::Event>(args->event, "event")));
  return event->Await();
}

PN_ENTRY(PJRT_Event_OnReady) {
  PN_REQUIRE_ARGS(args, PJRT_Event_OnReady_Args, user_arg);
  PN_ASSIGN_OR_RETURN(core::Event * event, (Unwrap<core::Event>(args->event, "event")));
  if (args->callback == nullptr) return InvalidArgument("`callback` is null");
  PJRT_Event_OnReadyCallback callback = args->callback;
  void* user_arg = args->user_arg;
  event->OnReady([callback, user_arg](Status status) {
    callback(MakeError(status.WithContext("event")), user_arg);  // the callback owns the error
  });
  return Status::Ok();
}

}  // namespace

void BindEvents(PJRT_Api* api) {
  api->PJRT_Event_Destroy = PJRT_Event_Destroy;
  api->PJRT_Event_IsReady = PJRT_Event_IsReady;
  api->PJRT_Event_Error = PJRT_Event_Error;
  api->PJRT_Event_Await = PJRT_Event_Await;
  api->PJRT_Event_OnReady = PJRT_Event_OnReady;
}

}  // namespace pjrt_neuron::api
