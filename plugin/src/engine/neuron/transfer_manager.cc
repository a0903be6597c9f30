// The Trainium engine's transfer manager (transfer_manager.h).
#include "engine/neuron/transfer_manager.h"

#include <cstring>

#include "engine/neuron/arrays.h"
#include "engine/neuron/neuron_buffer.h"

namespace pjrt_neuron::engine::neuron {

namespace {

struct UploadSlot {
  ShapeSpec shape;
  size_t bytes = 0;
  std::shared_ptr<DeviceTensor> tensor;       // device memory
  std::shared_ptr<std::vector<char>> host;    // pinned_host memory
  std::shared_ptr<PromiseEvent> filled = std::make_shared<PromiseEvent>();
  bool retrieved = false;
};

class NeuronTransferManager : public SlottedTransferManager<UploadSlot> {
 public:
  using Slot = UploadSlot;

  NeuronTransferManager(std::shared_ptr<Runtime> runtime, int core, std::string memory_kind, std::vector<Slot> slots)
      : SlottedTransferManager(std::move(slots)), runtime_(std::move(runtime)), core_(core),
        memory_kind_(std::move(memory_kind)) {}

  ~NeuronTransferManager() override {
    // Buffers whose last part never came must not wait for ever.
    for (Slot& slot : slots_) {
      slot.filled->Set(Status(ErrorCode::kAborted, "the transfer manager was destroyed before the buffer's last part"));
    }
  }

  StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    PN_RETURN_IF_ERROR(CheckTransferPart(index, slot->bytes, slot->filled->IsReady(), data, offset, size));
    if (size > 0) {
      if (slot->tensor != nullptr) {
        PN_RETURN_IF_ERROR(slot->tensor->Write(data, static_cast<size_t>(offset), static_cast<size_t>(size)));
      } else {
        std::lock_guard<std::mutex> lock(host_mutex_);
        std::memcpy(slot->host->data() + offset, data, static_cast<size_t>(size));
      }
    }
    if (last) slot->filled->Set(Status::Ok());
    return EventRef(std::make_shared<CompletedEvent>());
  }

  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->retrieved) return FailedPrecondition("buffer " + std::to_string(index) + " was already retrieved");
    slot->retrieved = true;
    auto buffer = std::make_unique<NeuronBuffer>(runtime_, core_, memory_kind_, slot->shape.type, slot->shape.dims,
                                                 slot->bytes, slot->tensor, std::vector<char>());
    buffer->FillFrom(slot->host, slot->filled);
    return std::unique_ptr<Buffer>(std::move(buffer));
  }

  Status SetBufferError(int index, ErrorCode code, const std::string& message) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->filled->IsReady()) {
      return FailedPrecondition("buffer " + std::to_string(index) + " already had its last part (or an error)");
    }
    slot->filled->Set(Status(code, message));
    return Status::Ok();
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  const int core_;
  const std::string memory_kind_;
  std::mutex host_mutex_;
};

}  // namespace

StatusOr<std::unique_ptr<TransferManager>> CreateNeuronTransferManager(const std::shared_ptr<Runtime>& runtime,
                                                                       int core, const std::vector<ShapeSpec>& shapes,
                                                                       const std::string& memory_kind) {
  if (memory_kind != "device" && memory_kind != "pinned_host") {
    return InvalidArgument("the Neuron engine has no '" + memory_kind + "' memory");
  }
  std::vector<UploadSlot> slots(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    UploadSlot& slot = slots[i];
    slot.shape = shapes[i];
    const size_t element = ElementBytes(slot.shape.type);
    if (element == 0) {
      return Unimplemented("element type " + TypeName(slot.shape.type) + " cannot be stored on a NeuronCore");
    }
    PN_ASSIGN_OR_RETURN(slot.bytes, DenseBytes(slot.shape.type, slot.shape.dims));
    if (memory_kind == "pinned_host") {
      slot.host = std::make_shared<std::vector<char>>(slot.bytes);
    } else if (slot.bytes > 0) {
      if (runtime == nullptr) return FailedPrecondition("this Neuron engine only compiles (no runtime session)");
      PN_ASSIGN_OR_RETURN(slot.tensor, runtime->Allocate(core, slot.bytes, ShapeText(slot.shape.type, slot.shape.dims) +
                                                                             " for a transfer manager's buffer " +
                                                                             std::to_string(i)));
    }
  }
  return std::unique_ptr<TransferManager>(
      std::make_unique<NeuronTransferManager>(runtime, core, memory_kind, std::move(slots)));
}

}  // namespace pjrt_neuron::engine::neuron
