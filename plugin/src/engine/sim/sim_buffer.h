// The simulator engine's buffers: the XLA CPU plugin's PJRT_Buffer behind the Buffer
// interface. Simulated HBM is host memory, so ready dense buffers are read straight from it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/block_pool.h"
#include "engine/engine.h"
#include "engine/sim/cpu_client.h"
#include "engine/sim/output_table.h"

namespace pjrt_neuron::engine::sim {

// Bytes per element of the types whose host copies the plugin makes itself; 0 leaves the copy
// to the engine (sub-byte and fp8 types).
size_t OwnCopyElementBytes(PJRT_Buffer_Type type);

class SimBuffer : public Buffer, public Pooled<SimBuffer> {
 public:
  SimBuffer(const CpuClient* client, PJRT_Buffer* buffer);
  // An execution's output: its shape and place are known, so the engine is not asked again.
  SimBuffer(const CpuClient* client, PJRT_Buffer* buffer, std::shared_ptr<OutputTable> outputs, size_t index,
            int core);
  ~SimBuffer() override;
  PJRT_Buffer* inner() { return buffer_; }
  Native<PJRT_Buffer> NativeBuffer() override { return {api_, buffer_}; }
  int core() override;
  const std::string& memory_kind() override;
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return outputs_ ? outputs_->shapes[output_index_].dims : dims_; }
  StatusOr<size_t> OnDeviceSizeInBytes() override;
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

 private:
  bool CopiedDirectly(void* dst, size_t dst_size, size_t* required_size);
  bool ReadyWithoutError();
  bool DenseDefaultLayout();

  const CpuClient* client_;
  const PJRT_Api* api_;
  PJRT_Buffer* buffer_;
  PJRT_Buffer_Type type_ = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims_;  // unless outputs_ has them
  int core_ = -1;
  std::string memory_kind_;
  std::shared_ptr<OutputTable> outputs_;  // set for an execution's outputs
  size_t output_index_ = 0;
};

}  // namespace pjrt_neuron::engine::sim
