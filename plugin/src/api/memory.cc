// PJRT_Memory: the HBM of each NeuronCore ("device" memory kind).
#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::Memory*> UnwrapMemory(PJRT_Memory* m) { return Unwrap<core::Memory>(m, "memory"); }

PN_ENTRY(PJRT_Memory_Id) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_Id_Args, id);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  args->id = memory->id();
  return Status::Ok();
}

PN_ENTRY(PJRT_Memory_Kind) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_Kind_Args, kind_size);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  args->kind = memory->kind().c_str();
  args->kind_size = memory->kind().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Memory_Kind_Id) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_Kind_Id_Args, kind_id);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  args->kind_id = memory->kind_id();
  return Status::Ok();
}

PN_ENTRY(PJRT_Memory_DebugString) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_DebugString_Args, debug_string_size);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  args->debug_string = memory->debug_string().c_str();
  args->debug_string_size = memory->debug_string().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Memory_ToString) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_ToString_Args, to_string_size);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  args->to_string = memory->to_string().c_str();
  args->to_string_size = memory->to_string().size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Memory_AddressableByDevices) {
  PN_REQUIRE_ARGS(args, PJRT_Memory_AddressableByDevices_Args, num_devices);
  PN_ASSIGN_OR_RETURN(core::Memory * memory, UnwrapMemory(args->memory));
  // One device per memory: point at the memory's own device field.
  static_assert(sizeof(core::Device*) == sizeof(PJRT_Device*), "handles are plain pointers");
  args->devices = reinterpret_cast<PJRT_Device* const*>(memory->device_slot());
  args->num_devices = 1;
  return Status::Ok();
}

// Called directly by callers of 0.112 and later, with no way to report an error: a handle that
// is not a live memory reads as holding nothing and keeps nothing.
void* GetUserData(PJRT_Memory* handle, const void* key) {
  core::Memory* memory = reinterpret_cast<core::Memory*>(handle);
  return core::IsLiveHandle(memory) ? memory->user_data(key) : nullptr;
}

void SetUserData(PJRT_Memory* handle, const void* key, void* data, void (*destructor)(void*)) {
  core::Memory* memory = reinterpret_cast<core::Memory*>(handle);
  if (core::IsLiveHandle(memory)) memory->set_user_data(key, data, destructor);
}

constexpr PJRT_Memory_FunctionTable kMemoryFunctionTable = {
    PJRT_Memory_FunctionTable_STRUCT_SIZE, nullptr, sizeof(void*), GetUserData, SetUserData,
};

}  // namespace

const PJRT_Memory_FunctionTable* MemoryFunctionTable() { return &kMemoryFunctionTable; }

void BindMemories(PJRT_Api* api) {
  api->PJRT_Memory_Id = PJRT_Memory_Id;
  api->PJRT_Memory_Kind = PJRT_Memory_Kind;
  api->PJRT_Memory_Kind_Id = PJRT_Memory_Kind_Id;
  api->PJRT_Memory_DebugString = PJRT_Memory_DebugString;
  api->PJRT_Memory_ToString = PJRT_Memory_ToString;
  api->PJRT_Memory_AddressableByDevices = PJRT_Memory_AddressableByDevices;
}

}  // namespace pjrt_neuron::api
