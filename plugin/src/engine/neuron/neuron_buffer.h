// Arrays of the Neuron engine: HBM buffers are device tensors of the runtime (written and read
// with nrt_tensor_write/read, dense major-to-minor); pinned_host buffers live in host memory;
// zero-byte arrays hold no tensor at all, since the runtime refuses zero-byte allocations.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/neuron/runtime.h"

namespace pjrt_neuron::engine::neuron {

class NeuronBuffer : public Buffer {
 public:
  // With `tensor` (device memory, bytes > 0) or `host` (pinned_host) or neither (zero bytes).
  NeuronBuffer(std::shared_ptr<Runtime> runtime, int core, std::string memory_kind, PJRT_Buffer_Type type,
               std::vector<int64_t> dims, size_t bytes, std::shared_ptr<DeviceTensor> tensor,
               std::vector<char> host);

  int core() override { return core_; }
  const std::string& memory_kind() override { return memory_kind_; }
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return dims_; }
  StatusOr<size_t> OnDeviceSizeInBytes() override { return bytes_; }
  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override;
  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override;
  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override;
  StatusOr<EventRef> ReadyEvent() override;
  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override;
  void Delete() override;
  bool IsDeleted() override;
  StatusOr<uintptr_t> UnsafePointer() override;
  Status IncreaseExternalReferenceCount() override;
  Status DecreaseExternalReferenceCount() override;
  StatusOr<void*> OpaqueDeviceMemoryPointer() override;

  size_t bytes() const { return bytes_; }
  // For executions: the device tensor (null for zero bytes or host memory), or the host bytes.
  StatusOr<std::shared_ptr<DeviceTensor>> TensorForExecution();
  StatusOr<std::vector<char>> HostBytes();
  // A donated input: its tensor now belongs to an output.
  void MarkDonated();
  // A transfer manager's buffer: its contents arrive later (into its tensor, or into `host` for
  // pinned_host memory); it is ready, and usable, once `filled` is set.
  void FillFrom(std::shared_ptr<std::vector<char>> host, EventRef filled);

 private:
  Status ReadAll(void* dst);
  Status CheckFilledLocked();  // with mutex_ held
  std::shared_ptr<Runtime> runtime_;
  const int core_;
  const std::string memory_kind_;
  const PJRT_Buffer_Type type_;
  const std::vector<int64_t> dims_;
  const size_t bytes_;
  std::vector<int64_t> minor_to_major_;
  std::mutex mutex_;  // guards what follows
  std::shared_ptr<DeviceTensor> tensor_;
  std::vector<char> host_;
  EventRef filled_;  // set for a transfer manager's buffer
  std::shared_ptr<std::vector<char>> filled_host_;
  bool deleted_ = false;
  int external_references_ = 0;
};

// A buffer on `core` in `memory_kind` ("device" or "pinned_host") holding `dense` (may be null:
// uninitialised). `runtime` may be null only for host memory.
StatusOr<std::unique_ptr<NeuronBuffer>> MakeBuffer(const std::shared_ptr<Runtime>& runtime, int core,
                                                   const std::string& memory_kind, PJRT_Buffer_Type type,
                                                   const std::vector<int64_t>& dims, const void* dense,
                                                   const std::string& purpose);

}  // namespace pjrt_neuron::engine::neuron
