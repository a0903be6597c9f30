// Buffers on a NeuronCore's memories, and the events that say when work on them is done.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/block_pool.h"
#include "common/status.h"
#include "core/device.h"
#include "core/tagged.h"
#include "engine/engine.h"

namespace pjrt_neuron::core {

class Event : public Tagged<0x4e455654>, public Pooled<Event> {
 public:
  explicit Event(engine::EventRef event) : event_(std::move(event)) {}
  static std::unique_ptr<Event> Completed(Status status = Status::Ok()) {
    return std::make_unique<Event>(std::make_shared<engine::CompletedEvent>(std::move(status)));
  }
  bool IsReady() { return event_->IsReady(); }
  Status Await() { return event_->Await(); }
  // Runs `done` exactly once, possibly on another thread, possibly before returning.
  void OnReady(std::function<void(Status)> done) { event_->OnReady(std::move(done)); }

 private:
  engine::EventRef event_;
};

class Buffer : public Tagged<0x4e425546>, public Pooled<Buffer> {
 public:
  // Takes over an engine buffer whose HBM the caller has already charged (`charged_bytes`);
  // `memory`, when known, is the device's memory of the buffer's kind.
  Buffer(Device* device, std::unique_ptr<engine::Buffer> buffer, int64_t charged_bytes, Memory* memory = nullptr);
  ~Buffer();
  Device* device() const { return device_; }
  Memory* memory() const { return memory_; }
  PJRT_Buffer_Type element_type() { return buffer_->element_type(); }
  const std::vector<int64_t>& dims() { return buffer_->dims(); }
  StatusOr<size_t> OnDeviceSizeInBytes() { return buffer_->OnDeviceSizeInBytes(); }
  // Fills `layout` (whose lifetime is the buffer's) with the device layout.
  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) { return buffer_->GetMemoryLayout(layout); }
  // The bytes a copy to the host in `host_layout` (null: the default) takes.
  StatusOr<size_t> HostSizeInBytes(const PJRT_Buffer_MemoryLayout* host_layout);
  // Copies to `dst`, which must hold HostSizeInBytes(host_layout) bytes.
  StatusOr<std::unique_ptr<Event>> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout);
  // Copies bytes [offset, offset + size) of the device representation, which must exist.
  StatusOr<std::unique_ptr<Event>> CopyRawToHost(void* dst, int64_t offset, int64_t size);
  StatusOr<std::unique_ptr<Event>> ReadyEvent();
  // An execution's output in device memory is ready when the execution completes: its ready
  // event is then the execution's, with no call into the engine.
  void set_ready_event(engine::EventRef ready) { ready_ = std::move(ready); }
  StatusOr<uintptr_t> UnsafePointer() { return buffer_->UnsafePointer(); }
  Status IncreaseExternalReferenceCount() { return buffer_->IncreaseExternalReferenceCount(); }
  Status DecreaseExternalReferenceCount() { return buffer_->DecreaseExternalReferenceCount(); }
  StatusOr<void*> OpaqueDeviceMemoryPointer() { return buffer_->OpaqueDeviceMemoryPointer(); }
  // For core: executions and copies hand the engine its own buffer.
  engine::Buffer& engine_buffer() { return *buffer_; }
  // The engine frees donated inputs itself; this keeps the HBM accounting in step.
  bool IsDeleted();
  void Delete();
  // Fails with INVALID_ARGUMENT when the buffer was deleted or donated.
  Status CheckUsable() const;
  // The same from what this object has seen, without asking the engine: engine buffers go away
  // only through Delete or a donating execution, after which the executable asks IsDeleted.
  Status CheckUsableSeen() const {
    if (gone_.load(std::memory_order_acquire)) return Unusable();
    return Status::Ok();
  }

 private:
  void ReleaseCharge();
  Status Unusable() const;
  Device* device_;
  Memory* memory_;
  std::unique_ptr<engine::Buffer> buffer_;
  engine::EventRef ready_;  // null: ask the engine
  std::atomic<int64_t> charged_bytes_{0};
  std::atomic<bool> gone_{false};  // deleted or donated, as seen by Delete / IsDeleted
};

}  // namespace pjrt_neuron::core
