// PJRT_Buffer: arrays in a NeuronCore's memory.
#include "api/common.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::Buffer*> UnwrapBuffer(PJRT_Buffer* b, const char* what = "buffer") {
  return Unwrap<core::Buffer>(b, what);
}

// A buffer whose contents are needed: live and not donated.
StatusOr<core::Buffer*> UsableBuffer(PJRT_Buffer* b, const char* what = "buffer") {
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(b, what));
  PN_RETURN_IF_ERROR(buffer->CheckUsable());
  return buffer;
}

PN_ENTRY(PJRT_Buffer_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_Destroy_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  delete buffer;
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_ElementType) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_ElementType_Args, type);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  args->type = buffer->element_type();
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_Dimensions) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_Dimensions_Args, num_dims);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  const auto& dims = buffer->dims();
  args->dims = dims.data();
  args->num_dims = dims.size();
  return Status::Ok();
}

// NeuronCores run static shapes only, so unpadded dimensions are the dimensions.
PN_ENTRY(PJRT_Buffer_UnpaddedDimensions) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_UnpaddedDimensions_Args, num_dims);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  const auto& dims = buffer->dims();
  args->unpadded_dims = dims.data();
  args->num_dims = dims.size();
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_DynamicDimensionIndices) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  (void)buffer;
  args->dynamic_dim_indices = nullptr;
  args->num_dynamic_dims = 0;
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_GetMemoryLayout) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_GetMemoryLayout_Args, layout);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  return buffer->GetMemoryLayout(&args->layout);
}

PN_ENTRY(PJRT_Buffer_OnDeviceSizeInBytes) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(args->on_device_size_in_bytes, buffer->OnDeviceSizeInBytes());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_Device) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_Device_Args, device);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  args->device = Wrap<PJRT_Device>(buffer->device());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_Memory) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_Memory_Args, memory);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  args->memory = Wrap<PJRT_Memory>(buffer->memory());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_Delete) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_Delete_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  buffer->Delete();
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_IsDeleted) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_IsDeleted_Args, is_deleted);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  args->is_deleted = buffer->IsDeleted();
  return Status::Ok();
}

Status CheckSameClient(core::Buffer* source, core::Device* destination) {
  if (!source->device()->client()->Owns(destination)) {
    return InvalidArgument("the destination belongs to another client than the buffer");
  }
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_CopyToDevice) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_CopyToDevice_Args, dst_buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(core::Device * target, Unwrap<core::Device>(args->dst_device, "dst_device"));
  PN_RETURN_IF_ERROR(CheckSameClient(buffer, target));
  PN_ASSIGN_OR_RETURN(auto copy, target->client()->CopyToMemory(*buffer, target->default_memory()));
  args->dst_buffer = Wrap<PJRT_Buffer>(copy.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_CopyToMemory) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_CopyToMemory_Args, dst_buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(core::Memory * memory, Unwrap<core::Memory>(args->dst_memory, "dst_memory"));
  PN_RETURN_IF_ERROR(CheckSameClient(buffer, memory->device()));
  PN_ASSIGN_OR_RETURN(auto copy, memory->device()->client()->CopyToMemory(*buffer, memory));
  args->dst_buffer = Wrap<PJRT_Buffer>(copy.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_ToHostBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_ToHostBuffer_Args, event);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->src, "src"));
  if (args->dst == nullptr) {
    PN_ASSIGN_OR_RETURN(args->dst_size, buffer->HostSizeInBytes(args->host_layout));
    args->event = nullptr;
    return Status::Ok();
  }
  PN_ASSIGN_OR_RETURN(auto done, buffer->ToHost(args->dst, args->dst_size, args->host_layout));
  args->event = Wrap<PJRT_Event>(done.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_CopyRawToHost) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_CopyRawToHost_Args, event);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  if (args->dst == nullptr) return InvalidArgument("`dst` is null");
  PN_ASSIGN_OR_RETURN(auto done, buffer->CopyRawToHost(args->dst, args->offset, args->transfer_size));
  args->event = Wrap<PJRT_Event>(done.release());
  return Status::Ok();
}

// NeuronCore HBM is not host memory, even when simulated.
PN_ENTRY(PJRT_Buffer_IsOnCpu) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_IsOnCpu_Args, is_on_cpu);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  (void)buffer;
  args->is_on_cpu = false;
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_ReadyEvent) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_ReadyEvent_Args, event);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(auto ready, buffer->ReadyEvent());
  args->event = Wrap<PJRT_Event>(ready.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_UnsafePointer) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_UnsafePointer_Args, buffer_pointer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(args->buffer_pointer, buffer->UnsafePointer());
  return Status::Ok();
}

PN_ENTRY(PJRT_Buffer_IncreaseExternalReferenceCount) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_IncreaseExternalReferenceCount_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  return buffer->IncreaseExternalReferenceCount();
}

PN_ENTRY(PJRT_Buffer_DecreaseExternalReferenceCount) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_DecreaseExternalReferenceCount_Args, buffer);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UnwrapBuffer(args->buffer));
  return buffer->DecreaseExternalReferenceCount();
}

PN_ENTRY(PJRT_Buffer_OpaqueDeviceMemoryDataPointer) {
  PN_REQUIRE_ARGS(args, PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, device_memory_ptr);
  PN_ASSIGN_OR_RETURN(core::Buffer * buffer, UsableBuffer(args->buffer));
  PN_ASSIGN_OR_RETURN(args->device_memory_ptr, buffer->OpaqueDeviceMemoryPointer());
  return Status::Ok();
}

}  // namespace

void BindBuffers(PJRT_Api* api) {
  api->PJRT_Buffer_Destroy = PJRT_Buffer_Destroy;
  api->PJRT_Buffer_ElementType = PJRT_Buffer_ElementType;
  api->PJRT_Buffer_Dimensions = PJRT_Buffer_Dimensions;
  api->PJRT_Buffer_UnpaddedDimensions = PJRT_Buffer_UnpaddedDimensions;
  api->PJRT_Buffer_DynamicDimensionIndices = PJRT_Buffer_DynamicDimensionIndices;
  api->PJRT_Buffer_GetMemoryLayout = PJRT_Buffer_GetMemoryLayout;
  api->PJRT_Buffer_OnDeviceSizeInBytes = PJRT_Buffer_OnDeviceSizeInBytes;
  api->PJRT_Buffer_Device = PJRT_Buffer_Device;
  api->PJRT_Buffer_Memory = PJRT_Buffer_Memory;
  api->PJRT_Buffer_Delete = PJRT_Buffer_Delete;
  api->PJRT_Buffer_IsDeleted = PJRT_Buffer_IsDeleted;
  api->PJRT_Buffer_CopyToDevice = PJRT_Buffer_CopyToDevice;
  api->PJRT_Buffer_CopyToMemory = PJRT_Buffer_CopyToMemory;
  api->PJRT_Buffer_ToHostBuffer = PJRT_Buffer_ToHostBuffer;
  api->PJRT_Buffer_CopyRawToHost = PJRT_Buffer_CopyRawToHost;
  api->PJRT_Buffer_IsOnCpu = PJRT_Buffer_IsOnCpu;
  api->PJRT_Buffer_ReadyEvent = PJRT_Buffer_ReadyEvent;
  api->PJRT_Buffer_UnsafePointer = PJRT_Buffer_UnsafePointer;
  api->PJRT_Buffer_IncreaseExternalReferenceCount = PJRT_Buffer_IncreaseExternalReferenceCount;
  api->PJRT_Buffer_DecreaseExternalReferenceCount = PJRT_Buffer_DecreaseExternalReferenceCount;
  api->PJRT_Buffer_OpaqueDeviceMemoryDataPointer = PJRT_Buffer_OpaqueDeviceMemoryDataPointer;
}

}  // namespace pjrt_neuron::api
