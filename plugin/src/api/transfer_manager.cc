// PJRT_AsyncHostToDeviceTransferManager: bulk uploads into buffers created up front.
#include "api/common.h"
#include "core/client.h"

namespace pjrt_neuron::api {
namespace {

StatusOr<core::TransferManager*> UnwrapManager(PJRT_AsyncHostToDeviceTransferManager* m) {
  return Unwrap<core::TransferManager>(m, "transfer_manager");
}

PN_ENTRY(PJRT_Client_CreateBuffersForAsyncHostToDevice) {
  PN_REQUIRE_ARGS(args, PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, transfer_manager);
  PN_ASSIGN_OR_RETURN(core::Client * client, (Unwrap<core::Client>(args->client, "client")));
  if (args->memory == nullptr) return InvalidArgument("`memory` is null");
  PN_ASSIGN_OR_RETURN(core::Memory * memory, Unwrap<core::Memory>(args->memory, "memory"));
  if (!client->Owns(memory->device())) return InvalidArgument("`memory` belongs to another client");
  if (args->num_shape_specs > 0 && args->shape_specs == nullptr) {
    return InvalidArgument("`shape_specs` is null but num_shape_specs is " + std::to_string(args->num_shape_specs));
  }
  if (args->num_device_layouts > 0) {
    return Unimplemented("device_layouts are not supported; the buffers get the default layout");
  }
  std::vector<engine::ShapeSpec> shapes;
  for (size_t i = 0; i < args->num_shape_specs; ++i) {
    const PJRT_ShapeSpec& spec = args->shape_specs[i];
    if (spec.num_dims > 0 && spec.dims == nullptr) {
      return InvalidArgument("shape_specs[" + std::to_string(i) + "].dims is null");
    }
    shapes.push_back({spec.element_type, std::vector<int64_t>(spec.dims, spec.dims + spec.num_dims)});
  }
  PN_ASSIGN_OR_RETURN(auto manager, client->CreateTransferManager(memory, shapes));
  args->transfer_manager = Wrap<PJRT_AsyncHostToDeviceTransferManager>(manager.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_Destroy) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, transfer_manager);
  if (args->transfer_manager == nullptr) return Status::Ok();  // allowed by the API
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  delete manager;
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_TransferData) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_TransferData_Args, done_with_h2d_transfer);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  PN_ASSIGN_OR_RETURN(auto done, manager->TransferData(args->buffer_index, args->data, args->offset,
                                                       args->transfer_size, args->is_last_transfer));
  args->done_with_h2d_transfer = Wrap<PJRT_Event>(done.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, buffer_out);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  PN_ASSIGN_OR_RETURN(auto buffer, manager->RetrieveBuffer(args->buffer_index));
  args->buffer_out = Wrap<PJRT_Buffer>(buffer.release());
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_Device) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_Device_Args, device_out);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  args->device_out = Wrap<PJRT_Device>(manager->device());
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_BufferCount) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args, buffer_count);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  args->buffer_count = manager->buffer_count();
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_BufferSize) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, buffer_size);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  PN_ASSIGN_OR_RETURN(args->buffer_size, manager->BufferSize(args->buffer_index));
  return Status::Ok();
}

PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_SetBufferError) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args, error_message_size);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  if (args->error_message_size > 0 && args->error_message == nullptr) return InvalidArgument("`error_message` is null");
  return manager->SetBufferError(args->buffer_index, static_cast<ErrorCode>(args->error_code),
                                 std::string(args->error_message == nullptr ? "" : args->error_message,
                                             args->error_message_size));
}

// Metadata is a hint to the transport; there is none to give it to.
PN_ENTRY(PJRT_AsyncHostToDeviceTransferManager_AddMetadata) {
  PN_REQUIRE_ARGS(args, PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args, num_metadata);
  PN_ASSIGN_OR_RETURN(core::TransferManager * manager, UnwrapManager(args->transfer_manager));
  (void)manager;
  PN_RETURN_IF_ERROR(ReadNamedValues(args->transfer_metadata, args->num_metadata).status());
  return Status::Ok();
}

}  // namespace

void BindTransferManagers(PJRT_Api* api) {
  api->PJRT_Client_CreateBuffersForAsyncHostToDevice = PJRT_Client_CreateBuffersForAsyncHostToDevice;
  api->PJRT_AsyncHostToDeviceTransferManager_Destroy = PJRT_AsyncHostToDeviceTransferManager_Destroy;
  api->PJRT_AsyncHostToDeviceTransferManager_TransferData = PJRT_AsyncHostToDeviceTransferManager_TransferData;
  api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer;
  api->PJRT_AsyncHostToDeviceTransferManager_Device = PJRT_AsyncHostToDeviceTransferManager_Device;
  api->PJRT_AsyncHostToDeviceTransferManager_BufferCount = PJRT_AsyncHostToDeviceTransferManager_BufferCount;
  api->PJRT_AsyncHostToDeviceTransferManager_BufferSize = PJRT_AsyncHostToDeviceTransferManager_BufferSize;
  api->PJRT_AsyncHostToDeviceTransferManager_SetBufferError = PJRT_AsyncHostToDeviceTransferManager_SetBufferError;
  api->PJRT_AsyncHostToDeviceTransferManager_AddMetadata = PJRT_AsyncHostToDeviceTransferManager_AddMetadata;
}

}  // namespace pjrt_neuron::api
