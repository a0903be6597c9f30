// Buffers and events: transfers to and from the host, checked before the engine sees them.
#include "core/buffer.h"

namespace pjrt_neuron::core {

Buffer::Buffer(Device* device, std::unique_ptr<engine::Buffer> buffer, int64_t charged_bytes, Memory* memory)
    : device_(device), memory_(memory), buffer_(std::move(buffer)), charged_bytes_(charged_bytes) {
  if (memory_ == nullptr) memory_ = device_->memory_of_kind(buffer_->memory_kind());
  if (memory_ == nullptr) memory_ = device_->default_memory();
}

Buffer::~Buffer() { ReleaseCharge(); }

void Buffer::ReleaseCharge() {
  int64_t bytes = charged_bytes_.exchange(0);
  if (bytes != 0) device_->Release(bytes);
}

bool Buffer::IsDeleted() {
  if (!buffer_->IsDeleted()) return false;
  gone_.store(true, std::memory_order_release);
  ReleaseCharge();
  return true;
}

void Buffer::Delete() {
  buffer_->Delete();
  gone_.store(true, std::memory_order_release);
  ReleaseCharge();
}

Status Buffer::Unusable() const {
  return InvalidArgument("buffer on NeuronCore " + std::to_string(device_->id()) + " has been deleted or donated");
}

Status Buffer::CheckUsable() const {
  if (buffer_->IsDeleted()) return Unusable();
  return Status::Ok();
}

StatusOr<size_t> Buffer::HostSizeInBytes(const PJRT_Buffer_MemoryLayout* host_layout) {
  size_t required = 0;
  PN_ASSIGN_OR_RETURN(engine::EventRef ignored, buffer_->ToHost(nullptr, 0, host_layout, &required));
  (void)ignored;
  return required;
}

StatusOr<std::unique_ptr<Event>> Buffer::ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout) {
  PN_ASSIGN_OR_RETURN(engine::EventRef done, buffer_->CheckedToHost(dst, dst_size, host_layout));
  return std::make_unique<Event>(std::move(done));
}

StatusOr<std::unique_ptr<Event>> Buffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  PN_ASSIGN_OR_RETURN(size_t total, buffer_->OnDeviceSizeInBytes());
  if (offset < 0 || size < 0 || static_cast<size_t>(offset + size) > total) {
    return InvalidArgument("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                           ") are outside the buffer's " + std::to_string(total) + " bytes");
  }
  PN_ASSIGN_OR_RETURN(engine::EventRef done, buffer_->CopyRawToHost(dst, offset, size));
  return std::make_unique<Event>(std::move(done));
}

StatusOr<std::unique_ptr<Event>> Buffer::ReadyEvent() {
  if (ready_ != nullptr) return std::make_unique<Event>(ready_);
  PN_ASSIGN_OR_RETURN(engine::EventRef ready, buffer_->ReadyEvent());
  return std::make_unique<Event>(std::move(ready));
}

}  // namespace pjrt_neuron::core
