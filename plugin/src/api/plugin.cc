// PJRT_Plugin_*: attributes frameworks read before they create a client.
#include <mutex>

#include "api/common.h"
#include "core/plugin_attributes.h"

namespace pjrt_neuron::api {
namespace {

PN_ENTRY(PJRT_Plugin_Initialize) {
  PN_REQUIRE_ARGS(args, PJRT_Plugin_Initialize_Args, extension_start);
  return Status::Ok();
}

// JAX serialises StableHLO to the versions named here, so they come from the engine.
PN_ENTRY(PJRT_Plugin_Attributes) {
  // Headers before the fix of this struct's size macro (torch-xla 2.8's) end it at
  // `attributes`, although their struct has `num_attributes` too: accept that size, and
  // write both fields, as those callers read both.
  PN_REQUIRE_ARGS(args, PJRT_Plugin_Attributes_Args, attributes);
  static std::mutex mutex;
  static std::unique_ptr<NamedValues> cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached == nullptr) {
    PN_ASSIGN_OR_RETURN(engine::Attributes attributes, core::PluginAttributes());
    cached = std::make_unique<NamedValues>(attributes);
  }
  args->attributes = cached->data();
  args->num_attributes = cached->size();
  return Status::Ok();
}

}  // namespace

void BindPlugin(PJRT_Api* api) {
  api->PJRT_Plugin_Initialize = PJRT_Plugin_Initialize;
  api->PJRT_Plugin_Attributes = PJRT_Plugin_Attributes;
}

}  // namespace pjrt_neuron::api
