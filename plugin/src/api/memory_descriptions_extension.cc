// The MemoryDescriptions extension: the memory kinds every NeuronCore has (HBM as "device",
// then "pinned_host"), answered from our device model, so it holds for topologies made without
// a client (ahead-of-time compilation) and matches what PJRT_Device_AddressableMemories lists.
//
// The extension's ABI (version 1) is declared here from openxla/xla's public description,
// since the engine wheel ships only pjrt_c_api.h.
#include <cstring>
#include <string>

#include "api/common.h"
#include "core/topology.h"

extern "C" {
typedef struct PJRT_MemoryDescription PJRT_MemoryDescription;

struct PJRT_DeviceDescription_MemoryDescriptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const PJRT_MemoryDescription* const* memory_descriptions;  // out
  size_t num_memory_descriptions;                            // out
  size_t default_memory_index;                               // out; (size_t)-1: no default
};
struct PJRT_MemoryDescription_Kind_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_MemoryDescription* memory_description;
  const char* kind;  // out, lives as long as the description
  size_t kind_size;  // out
  int kind_id;       // out
};
struct PJRT_MemoryDescriptions_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*DeviceDescription_MemoryDescriptions)(PJRT_DeviceDescription_MemoryDescriptions_Args*);
  PJRT_Error* (*MemoryDescription_Kind)(PJRT_MemoryDescription_Kind_Args*);
};
// Opaque in the ABI; ours are static, one per memory kind.
struct PJRT_MemoryDescription {
  const char* kind;
  int kind_id;
};
}

namespace pjrt_neuron::api {
namespace {

using engine::Engine;
constexpr size_t kNumKinds = sizeof(Engine::kMemoryKinds) / sizeof(Engine::kMemoryKinds[0]);

// kind_id is the kind's place in Engine::kMemoryKinds, as core::Device numbers its memories.
const PJRT_MemoryDescription kDescriptions[kNumKinds] = {{Engine::kMemoryKinds[0], 0}, {Engine::kMemoryKinds[1], 1}};
const PJRT_MemoryDescription* const kDescriptionList[kNumKinds] = {&kDescriptions[0], &kDescriptions[1]};

Status DeviceDescriptionMemoryDescriptionsBody(PJRT_DeviceDescription_MemoryDescriptions_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_MemoryDescriptions_Args, default_memory_index);
  PN_RETURN_IF_ERROR(Unwrap<core::DeviceDescription>(args->device_description, "device_description").status());
  args->memory_descriptions = kDescriptionList;
  args->num_memory_descriptions = kNumKinds;
  args->default_memory_index = 0;  // HBM
  return Status::Ok();
}

Status MemoryDescriptionKindBody(PJRT_MemoryDescription_Kind_Args* args) {
  PN_REQUIRE_ARGS(args, PJRT_MemoryDescription_Kind_Args, kind_id);
  const PJRT_MemoryDescription* description = args->memory_description;
  if (description == nullptr) return InvalidArgument("`memory_description` is null");
  if (description < &kDescriptions[0] || description >= &kDescriptions[kNumKinds]) {
    return InvalidArgument("`memory_description` is not one this plugin handed out");
  }
  args->kind = description->kind;
  args->kind_size = std::strlen(description->kind);
  args->kind_id = description->kind_id;
  return Status::Ok();
}

PJRT_Error* DeviceDescriptionMemoryDescriptions(PJRT_DeviceDescription_MemoryDescriptions_Args* args) {
  return Run("PJRT_DeviceDescription_MemoryDescriptions",
             [args] { return DeviceDescriptionMemoryDescriptionsBody(args); });
}
PJRT_Error* MemoryDescriptionKind(PJRT_MemoryDescription_Kind_Args* args) {
  return Run("PJRT_MemoryDescription_Kind", [args] { return MemoryDescriptionKindBody(args); });
}

PJRT_MemoryDescriptions_Extension memory_descriptions_extension = {
    {sizeof(PJRT_MemoryDescriptions_Extension), PJRT_Extension_Type_MemoryDescriptions, nullptr},
    DeviceDescriptionMemoryDescriptions,
    MemoryDescriptionKind,
};

}  // namespace

PJRT_Extension_Base* MemoryDescriptionsExtension(PJRT_Extension_Base* next) {
  memory_descriptions_extension.base.next = next;
  return &memory_descriptions_extension.base;
}

}  // namespace pjrt_neuron::api
