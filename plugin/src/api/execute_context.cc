// PJRT_ExecuteContext: per-execution data for custom-call handlers. The FFI extension does not
// forward user data yet (ffi_extension.cc), so nothing can be attached to a context; a context may
// still be created, passed in PJRT_ExecuteOptions and destroyed, as clients do unconditionally.
#include "api/common.h"
#include "core/tagged.h"

namespace pjrt_neuron::api {
namespace {

class ExecuteContext : public core::Tagged<0x4e435458> {};

PN_ENTRY(PJRT_ExecuteContext_Create) {
  PN_REQUIRE_ARGS(args, PJRT_ExecuteContext_Create_Args, context);
  args->context = reinterpret_cast<PJRT_ExecuteContext*>(new ExecuteContext());
  return Status::Ok();
}

PN_ENTRY(PJRT_ExecuteContext_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_ExecuteContext_Destroy_Args, context);
  PN_ASSIGN_OR_RETURN(ExecuteContext * context, (Unwrap<ExecuteContext>(args->context, "context")));
  delete context;
  return Status::Ok();
}

}  // namespace

void BindExecuteContexts(PJRT_Api* api) {
  api->PJRT_ExecuteContext_Create = PJRT_ExecuteContext_Create;
  api->PJRT_ExecuteContext_Destroy = PJRT_ExecuteContext_Destroy;
}

}  // namespace pjrt_neuron::api
