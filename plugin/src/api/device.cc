// PJRT_Device and PJRT_DeviceDescription: one device per simulated NeuronCore.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::DeviceDescription*> UnwrapDescription(PJRT_DeviceDescription* d) {
  return Unwrap<core::DeviceDescription>(d, "device_description");
}
StatusOr<core::Device*> UnwrapDevice(PJRT_Device* d) { return Unwrap<core::Device>(d, "device"); }

PN_ENTRY(PJRT_DeviceDescription_Id) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_Id_Args, id);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  args->id = d->id;
  return Status::Ok();
}

PN_ENTRY(PJRT_DeviceDescription_ProcessIndex) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_ProcessIndex_Args, process_index);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  args->process_index = d->process_index;
  return Status::Ok();
}

PN_ENTRY(PJRT_DeviceDescription_Attributes) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_Attributes_Args, attributes);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  const NamedValues& values = AttributeViews(*d);
  args->attributes = values.data();
  args->num_attributes = values.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_DeviceDescription_Kind) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_Kind_Args, device_kind_size);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  args->device_kind = d->kind.c_str();
  args->device_kind_size = d->kind.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_DeviceDescription_DebugString) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_DebugString_Args, debug_string_size);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  args->debug_string = d->debug_string.c_str();
  args->debug_string_size = d->debug_string.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_DeviceDescription_ToString) {
  PN_REQUIRE_ARGS(args, PJRT_DeviceDescription_ToString_Args, to_string_size);
  PN_ASSIGN_OR_RETURN(core::DeviceDescription * d, UnwrapDescription(args->device_description));
  args->to_string = d->to_string.c_str();
  args->to_string_size = d->to_string.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_GetDescription) {
  PN_REQUIRE_ARGS(args, PJRT_Device_GetDescription_Args, device_description);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  args->device_description =
      Wrap<PJRT_DeviceDescription>(const_cast<core::DeviceDescription*>(&device->description()));
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_IsAddressable) {
  PN_REQUIRE_ARGS(args, PJRT_Device_IsAddressable_Args, is_addressable);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  args->is_addressable = device->addressable();
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_LocalHardwareId) {
  PN_REQUIRE_ARGS(args, PJRT_Device_LocalHardwareId_Args, local_hardware_id);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  args->local_hardware_id = device->local_hardware_id();
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_AddressableMemories) {
  PN_REQUIRE_ARGS(args, PJRT_Device_AddressableMemories_Args, num_memories);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  const std::vector<core::Memory*>* memories = &device->memories();
  args->memories = reinterpret_cast<PJRT_Memory* const*>(memories->data());
  args->num_memories = memories->size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_DefaultMemory) {
  PN_REQUIRE_ARGS(args, PJRT_Device_DefaultMemory_Args, memory);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  args->memory = Wrap<PJRT_Memory>(device->default_memory());
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_MemoryStats) {
  PN_REQUIRE_ARGS(args, PJRT_Device_MemoryStats_Args, bytes_in_use);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  core::MemoryStats stats = device->memory_stats();
  using A = PJRT_Device_MemoryStats_Args;
  // Clear every output the caller's struct holds, so untracked stats read as "not set".
  const size_t start = offsetof(A, bytes_in_use);
  const size_t end = std::min<size_t>(args->struct_size, sizeof(A));
  std::memset(reinterpret_cast<char*>(args) + start, 0, end - start);
  args->bytes_in_use = stats.bytes_in_use;
  // Each optional field is written only when the caller's struct has room for it.
  auto set = [&](auto value_member, auto is_set_member, int64_t value, size_t end) {
    if (args->struct_size >= end) {
      args->*value_member = value;
      args->*is_set_member = true;
    }
  };
  set(&A::peak_bytes_in_use, &A::peak_bytes_in_use_is_set, stats.peak_bytes_in_use, PN_PREFIX_SIZE(A, peak_bytes_in_use_is_set));
  set(&A::num_allocs, &A::num_allocs_is_set, stats.num_allocs, PN_PREFIX_SIZE(A, num_allocs_is_set));
  set(&A::largest_alloc_size, &A::largest_alloc_size_is_set, stats.largest_alloc_size, PN_PREFIX_SIZE(A, largest_alloc_size_is_set));
  set(&A::bytes_limit, &A::bytes_limit_is_set, stats.bytes_limit, PN_PREFIX_SIZE(A, bytes_limit_is_set));
  // The simulated HBM reserves exactly what is in use, in one contiguous free block.
  set(&A::bytes_reserved, &A::bytes_reserved_is_set, stats.bytes_in_use, PN_PREFIX_SIZE(A, bytes_reserved_is_set));
  set(&A::peak_bytes_reserved, &A::peak_bytes_reserved_is_set, stats.peak_bytes_in_use,
      PN_PREFIX_SIZE(A, peak_bytes_reserved_is_set));
  set(&A::bytes_reservable_limit, &A::bytes_reservable_limit_is_set, stats.bytes_limit,
      PN_PREFIX_SIZE(A, bytes_reservable_limit_is_set));
  set(&A::largest_free_block_bytes, &A::largest_free_block_bytes_is_set, stats.bytes_limit - stats.bytes_in_use,
      PN_PREFIX_SIZE(A, largest_free_block_bytes_is_set));
  return Status::Ok();
}

// The device's attributes are its description's; nothing is allocated for the caller to free.
PN_ENTRY(PJRT_Device_GetAttributes) {
  PN_REQUIRE_ARGS(args, PJRT_Device_GetAttributes_Args, num_attributes);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  const NamedValues& values = AttributeViews(device->description());
  args->attributes = values.data();
  args->num_attributes = values.size();
  if (PN_HAS(args, PJRT_Device_GetAttributes_Args, attributes_deleter)) {
    args->device_attributes = nullptr;
    args->attributes_deleter = [](PJRT_Device_Attributes*) {};
  }
  return Status::Ok();
}

PN_ENTRY(PJRT_Device_ClearMemoryStats) {
  PN_REQUIRE_ARGS(args, PJRT_Device_ClearMemoryStats_Args, device);
  PN_ASSIGN_OR_RETURN(core::Device * device, UnwrapDevice(args->device));
  device->ResetPeak();
  return Status::Ok();
}

}  // namespace

void BindNewerDevices(PJRT_Api_Newer* api) {
  api->PJRT_Device_GetAttributes = PJRT_Device_GetAttributes;
  api->PJRT_Device_ClearMemoryStats = PJRT_Device_ClearMemoryStats;
}

void BindDevices(PJRT_Api* api) {
  api->PJRT_DeviceDescription_Id = PJRT_DeviceDescription_Id;
  api->PJRT_DeviceDescription_ProcessIndex = PJRT_DeviceDescription_ProcessIndex;
  api->PJRT_DeviceDescription_Attributes = PJRT_DeviceDescription_Attributes;
  api->PJRT_DeviceDescription_Kind = PJRT_DeviceDescription_Kind;
  api->PJRT_DeviceDescription_DebugString = PJRT_DeviceDescription_DebugString;
  api->PJRT_DeviceDescription_ToString = PJRT_DeviceDescription_ToString;
  api->PJRT_Device_GetDescription = PJRT_Device_GetDescription;
  api->PJRT_Device_IsAddressable = PJRT_Device_IsAddressable;
  api->PJRT_Device_LocalHardwareId = PJRT_Device_LocalHardwareId;
  api->PJRT_Device_AddressableMemories = PJRT_Device_AddressableMemories;
  api->PJRT_Device_DefaultMemory = PJRT_Device_DefaultMemory;
  api->PJRT_Device_MemoryStats = PJRT_Device_MemoryStats;
}

}  // namespace pjrt_neuron::api
