// Buffers held by the instance daemon (remote_buffer.h).
#include "engine/remote/remote_buffer.h"

#include <algorithm>
#include <cstring>

namespace pjrt_neuron::engine::remote {
namespace {

Status MultiProcessOnly(const std::string& what) {
  return Unimplemented(what + " is not available in multi-process mode: the buffer lives in the instance daemon");
}

}  // namespace

StatusOr<uintptr_t> DaemonHeldBuffer::UnsafePointer() { return MultiProcessOnly("a raw device pointer"); }
Status DaemonHeldBuffer::IncreaseExternalReferenceCount() { return MultiProcessOnly("an external reference"); }
Status DaemonHeldBuffer::DecreaseExternalReferenceCount() { return MultiProcessOnly("an external reference"); }
StatusOr<void*> DaemonHeldBuffer::OpaqueDeviceMemoryPointer() { return MultiProcessOnly("a device memory pointer"); }

RemoteBuffer::~RemoteBuffer() {
  ReleaseBufferRequest release;
  release.id = info_.id;
  if (info_.size <= kDeferredReleaseBytes) {
    channel_->Defer(release);
  } else {
    channel_->Send(release);
  }
}

StatusOr<EventRef> RemoteBuffer::ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                                       size_t* required_size) {
  PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
  char* window = dst != nullptr && dst_size >= kSharedTransferBytes ? c->WindowFor(dst_size) : nullptr;
  ToHostRequest request;
  request.buffer = info_.id;
  request.query_only = dst == nullptr;
  request.dst_size = static_cast<int64_t>(dst_size);
  request.placement = PlacementOf(window);
  if (host_layout != nullptr) request.host_layout = LayoutData::From(*host_layout);
  auto bytes = channel_->CallOn(*c, EncodeRequest(request));
  StatusOr<ToHostReply> reply = bytes.ok() ? DecodeReply<ToHostReply>(*bytes) : bytes.status();
  if (reply.ok()) {
    std::string_view data = PlacedData(reply->bytes, *c);
    if (required_size != nullptr) *required_size = static_cast<size_t>(reply->required_size);
    if (dst != nullptr && !data.empty()) std::memcpy(dst, data.data(), std::min(data.size(), dst_size));
  }
  channel_->Return(std::move(c));
  PN_RETURN_IF_ERROR(reply.status());
  return EventRef(std::make_shared<CompletedEvent>());
}

StatusOr<EventRef> RemoteBuffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
  char* window = size >= static_cast<int64_t>(kSharedTransferBytes) ? c->WindowFor(size) : nullptr;
  CopyRawToHostRequest request;
  request.buffer = info_.id;
  request.offset = offset;
  request.size = size;
  request.placement = PlacementOf(window);
  auto bytes = channel_->CallOn(*c, EncodeRequest(request));
  StatusOr<CopyRawToHostReply> reply = bytes.ok() ? DecodeReply<CopyRawToHostReply>(*bytes) : bytes.status();
  if (reply.ok()) {
    std::string_view data = PlacedData(reply->bytes, *c);
    if (!data.empty()) std::memcpy(dst, data.data(), std::min<size_t>(data.size(), static_cast<size_t>(size)));
  }
  channel_->Return(std::move(c));
  PN_RETURN_IF_ERROR(reply.status());
  return EventRef(std::make_shared<CompletedEvent>());
}

StatusOr<std::unique_ptr<Buffer>> RemoteBuffer::CopyTo(int core, const std::string& memory_kind) {
  CopyToRequest request;
  request.buffer = info_.id;
  request.core = core;
  request.memory_kind = memory_kind;
  PN_ASSIGN_OR_RETURN(BufferInfo info, channel_->Call<BufferInfo>(request));
  return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, std::move(info)));
}

Status RemoteBuffer::GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) {
  if (!info_.layout) return Unimplemented("the engine reports no layout for this buffer");
  info_.layout->Fill(layout);
  return Status::Ok();
}

void RemoteBuffer::Delete() {
  if (deleted_.exchange(true)) return;
  DeleteBufferRequest request;
  request.id = info_.id;
  channel_->Call<EmptyReply>(request);
}

}  // namespace pjrt_neuron::engine::remote
