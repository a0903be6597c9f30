// Buffers of multi-process mode: their memory is in the instance daemon, and reads, copies and
// deletes are requests on the channel.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/remote/channel.h"

namespace pjrt_neuron::engine::remote {

// A buffer whose memory is in the instance daemon: what needs its address is refused.
class DaemonHeldBuffer : public Buffer {
 public:
  StatusOr<uintptr_t> UnsafePointer() override;
  Status IncreaseExternalReferenceCount() override;
  Status DecreaseExternalReferenceCount() override;
  StatusOr<void*> OpaqueDeviceMemoryPointer() override;
};

class RemoteBuffer : public DaemonHeldBuffer {
 public:
  RemoteBuffer(std::shared_ptr<Channel> channel, BufferInfo info)
      : channel_(std::move(channel)), info_(std::move(info)) {}
  ~RemoteBuffer() override;
  // Releases of buffers up to this size travel with the next call (Channel::Defer).
  static constexpr int64_t kDeferredReleaseBytes = 64 << 10;
  int64_t id() const { return info_.id; }
  void MarkDeleted() { deleted_ = true; }

  int core() override { return info_.core; }
  const std::string& memory_kind() override { return info_.memory_kind; }
  PJRT_Buffer_Type element_type() override { return info_.type; }
  const std::vector<int64_t>& dims() override { return info_.dims; }
  StatusOr<size_t> OnDeviceSizeInBytes() override { return static_cast<size_t>(info_.size); }
  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override;
  // The daemon checks the size and copies in one round trip.
  StatusOr<EventRef> CheckedToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout) override {
    return ToHost(dst, dst_size, host_layout, nullptr);
  }
  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override;
  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override;
  // The daemon answers only once the data is there.
  StatusOr<EventRef> ReadyEvent() override { return EventRef(std::make_shared<CompletedEvent>()); }
  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override;
  void Delete() override;
  bool IsDeleted() override { return deleted_; }

 private:
  std::shared_ptr<Channel> channel_;
  const BufferInfo info_;
  std::atomic<bool> deleted_{false};
};

}  // namespace pjrt_neuron::engine::remote
