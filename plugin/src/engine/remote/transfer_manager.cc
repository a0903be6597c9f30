// Multi-process mode's transfer manager (transfer_manager.h).
#include "engine/remote/transfer_manager.h"

#include <cstring>

#include "engine/remote/filled_buffer.h"

namespace pjrt_neuron::engine::remote {
namespace {

struct StagedSlot {
  ShapeSpec shape;
  size_t bytes = 0;
  std::vector<char> staging;
  std::shared_ptr<PendingFill> fill = std::make_shared<PendingFill>();
  bool retrieved = false;
};

class RemoteTransferManager : public SlottedTransferManager<StagedSlot> {
 public:
  using Slot = StagedSlot;

  RemoteTransferManager(UploadFn upload, int core, std::string memory_kind, std::vector<Slot> slots)
      : SlottedTransferManager(std::move(slots)), upload_(std::move(upload)), core_(core),
        memory_kind_(std::move(memory_kind)) {}

  ~RemoteTransferManager() override {
    for (Slot& slot : slots_) Finish(slot, Status(ErrorCode::kAborted, "the transfer manager was destroyed before "
                                                                        "the buffer's last part"), nullptr);
  }

  StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    PN_RETURN_IF_ERROR(CheckTransferPart(index, slot->bytes, slot->fill->ready->IsReady(), data, offset, size));
    if (size > 0) std::memcpy(slot->staging.data() + offset, data, static_cast<size_t>(size));
    if (last) {
      HostBufferSpec spec;
      spec.data = slot->staging.data();
      spec.type = slot->shape.type;
      spec.dims = slot->shape.dims;
      spec.memory_kind = memory_kind_;
      auto uploaded = upload_(core_, spec);
      Status status = uploaded.status();
      std::unique_ptr<RemoteBuffer> buffer;
      if (uploaded.ok()) buffer.reset(dynamic_cast<RemoteBuffer*>(uploaded->buffer.release()));
      Finish(*slot, status, std::move(buffer));
      std::vector<char>().swap(slot->staging);
      PN_RETURN_IF_ERROR(status);
    }
    return EventRef(std::make_shared<CompletedEvent>());
  }

  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->retrieved) return FailedPrecondition("buffer " + std::to_string(index) + " was already retrieved");
    slot->retrieved = true;
    return std::unique_ptr<Buffer>(std::make_unique<FilledRemoteBuffer>(slot->fill, core_, memory_kind_, slot->shape.type,
                                                                        slot->shape.dims, slot->bytes));
  }

  Status SetBufferError(int index, ErrorCode code, const std::string& message) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->fill->ready->IsReady()) {
      return FailedPrecondition("buffer " + std::to_string(index) + " already had its last part (or an error)");
    }
    Finish(*slot, Status(code, message), nullptr);
    return Status::Ok();
  }

 private:
  static void Finish(Slot& slot, Status status, std::unique_ptr<RemoteBuffer> buffer) {
    {
      std::lock_guard<std::mutex> lock(slot.fill->mutex);
      if (slot.fill->done) return;
      slot.fill->done = true;
      slot.fill->status = status;
      slot.fill->buffer = std::move(buffer);
    }
    slot.fill->ready->Set(status);
  }

  UploadFn upload_;
  const int core_;
  const std::string memory_kind_;
};

}  // namespace

std::unique_ptr<TransferManager> CreateRemoteTransferManager(UploadFn upload, int core, const std::string& memory_kind,
                                                             const std::vector<ShapeSpec>& shapes,
                                                             const std::vector<size_t>& bytes) {
  std::vector<StagedSlot> slots(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    slots[i].shape = shapes[i];
    slots[i].bytes = bytes[i];
    slots[i].staging.resize(slots[i].bytes);
  }
  return std::make_unique<RemoteTransferManager>(std::move(upload), core, memory_kind, std::move(slots));
}

}  // namespace pjrt_neuron::engine::remote
