// The simulator engine's transfer manager (transfer_manager.h).
#include "engine/sim/transfer_manager.h"

#include "engine/sim/engine_library.h"
#include "engine/sim/sim_buffer.h"
#include "engine/sim/sim_event.h"

namespace pjrt_neuron::engine::sim {
namespace {

class SimTransferManager : public TransferManager {
 public:
  SimTransferManager(const CpuClient* client, PJRT_AsyncHostToDeviceTransferManager* manager, size_t count)
      : client_(client), api_(client->api()), manager_(manager), count_(count) {}
  ~SimTransferManager() override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, args);
    args.transfer_manager = manager_;
    TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_Destroy(&args));
  }
  size_t buffer_count() override { return count_; }
  StatusOr<size_t> BufferSize(int index) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_BufferSize(&args)));
    return args.buffer_size;
  }
  StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    args.data = data;
    args.offset = offset;
    args.transfer_size = size;
    args.is_last_transfer = last;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_TransferData(&args)));
    return WrapEvent(api_, args.done_with_h2d_transfer);
  }
  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&args)));
    return std::unique_ptr<Buffer>(std::make_unique<SimBuffer>(client_, args.buffer_out));
  }
  Status SetBufferError(int index, ErrorCode code, const std::string& message) override {
    INNER_ARGS(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args, args);
    args.transfer_manager = manager_;
    args.buffer_index = index;
    args.error_code = static_cast<PJRT_Error_Code>(code);
    args.error_message = message.data();
    args.error_message_size = message.size();
    return TakeError(api_, api_->PJRT_AsyncHostToDeviceTransferManager_SetBufferError(&args));
  }

 private:
  const CpuClient* client_;
  const PJRT_Api* api_;
  PJRT_AsyncHostToDeviceTransferManager* manager_;
  size_t count_;
};

}  // namespace

StatusOr<std::unique_ptr<TransferManager>> CreateSimTransferManager(const CpuClient* client, int core,
                                                                    const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) {
  std::vector<PJRT_ShapeSpec> specs(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::memset(&specs[i], 0, sizeof(specs[i]));
    specs[i].struct_size = PJRT_ShapeSpec_STRUCT_SIZE;
    specs[i].dims = shapes[i].dims.data();
    specs[i].num_dims = shapes[i].dims.size();
    specs[i].element_type = shapes[i].type;
  }
  const PJRT_Api* api = client->api();
  INNER_ARGS(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, args);
  args.client = client->client();
  args.shape_specs = specs.data();
  args.num_shape_specs = specs.size();
  PN_ASSIGN_OR_RETURN(args.memory, client->memory(core, memory_kind));
  PN_RETURN_IF_ERROR(TakeError(api, api->PJRT_Client_CreateBuffersForAsyncHostToDevice(&args)));
  return std::unique_ptr<TransferManager>(new SimTransferManager(client, args.transfer_manager, shapes.size()));
}

}  // namespace pjrt_neuron::engine::sim
