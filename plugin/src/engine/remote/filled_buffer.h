// A transfer manager's buffer in multi-process mode: its bytes gather in this process and reach
// the daemon in one transfer when the last part arrives; until then it is refused for use, like
// the Trainium engine's (executions and reads here are synchronous).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/remote/remote_buffer.h"

namespace pjrt_neuron::engine::remote {

// What the transfer manager hands the buffer once the last part has gone to the daemon.
struct PendingFill {
  std::mutex mutex;
  std::unique_ptr<RemoteBuffer> buffer;  // once filled
  Status status;                         // an error set instead
  bool done = false;
  std::shared_ptr<PromiseEvent> ready = std::make_shared<PromiseEvent>();

  StatusOr<RemoteBuffer*> Filled(int core);
};

class FilledRemoteBuffer : public DaemonHeldBuffer {
 public:
  FilledRemoteBuffer(std::shared_ptr<PendingFill> fill, int core, std::string memory_kind, PJRT_Buffer_Type type,
                     std::vector<int64_t> dims, size_t size)
      : fill_(std::move(fill)), core_(core), memory_kind_(std::move(memory_kind)), type_(type),
        dims_(std::move(dims)), size_(size) {}

  StatusOr<RemoteBuffer*> Filled();

  int core() override { return core_; }
  const std::string& memory_kind() override { return memory_kind_; }
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return dims_; }
  StatusOr<size_t> OnDeviceSizeInBytes() override { return size_; }
  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override;
  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override;
  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override;
  StatusOr<EventRef> ReadyEvent() override { return EventRef(fill_->ready); }
  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override;
  void Delete() override;
  bool IsDeleted() override;

 private:
  std::shared_ptr<PendingFill> fill_;
  const int core_;
  const std::string memory_kind_;
  const PJRT_Buffer_Type type_;
  const std::vector<int64_t> dims_;
  const size_t size_;
  std::atomic<bool> deleted_{false};
};

// The engine buffer behind an argument: a buffer of this engine, or a filled transfer-manager one.
StatusOr<RemoteBuffer*> RemoteBufferOf(Buffer* buffer);

}  // namespace pjrt_neuron::engine::remote
