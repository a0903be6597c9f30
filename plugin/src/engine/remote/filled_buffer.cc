// Transfer managers' buffers in multi-process mode (filled_buffer.h).
#include "engine/remote/filled_buffer.h"

namespace pjrt_neuron::engine::remote {

StatusOr<RemoteBuffer*> PendingFill::Filled(int core) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!done) {
    return FailedPrecondition("the buffer on NeuronCore " + std::to_string(core) +
                              " is still being filled by a transfer manager (its last part has not arrived); "
                              "wait for its ready event");
  }
  PN_RETURN_IF_ERROR(status);
  return buffer.get();
}

StatusOr<RemoteBuffer*> FilledRemoteBuffer::Filled() {
  if (deleted_) return InvalidArgument("the buffer has been deleted");
  return fill_->Filled(core_);
}

StatusOr<EventRef> FilledRemoteBuffer::ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                                              size_t* required_size) {
  if (dst == nullptr && required_size != nullptr) {
    *required_size = size_;
    return EventRef(std::make_shared<CompletedEvent>());
  }
  PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
  return buffer->ToHost(dst, dst_size, host_layout, required_size);
}

StatusOr<EventRef> FilledRemoteBuffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
  return buffer->CopyRawToHost(dst, offset, size);
}

StatusOr<std::unique_ptr<Buffer>> FilledRemoteBuffer::CopyTo(int core, const std::string& memory_kind) {
  PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
  return buffer->CopyTo(core, memory_kind);
}

Status FilledRemoteBuffer::GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) {
  PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
  return buffer->GetMemoryLayout(layout);
}

void FilledRemoteBuffer::Delete() {
  if (deleted_.exchange(true)) return;
  auto buffer = fill_->Filled(core_);
  if (buffer.ok()) buffer.value()->Delete();
}

bool FilledRemoteBuffer::IsDeleted() {
  if (deleted_) return true;
  auto buffer = fill_->Filled(core_);
  return buffer.ok() && buffer.value()->IsDeleted();  // donated to an execution
}

StatusOr<RemoteBuffer*> RemoteBufferOf(Buffer* buffer) {
  if (auto* remote = dynamic_cast<RemoteBuffer*>(buffer)) return remote;
  if (auto* filled = dynamic_cast<FilledRemoteBuffer*>(buffer)) return filled->Filled();
  return InvalidArgument("an argument is not a buffer of this engine");
}

}  // namespace pjrt_neuron::engine::remote
