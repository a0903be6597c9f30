// The Neuron engine's buffers (neuron_buffer.h). Transfers are synchronous: each event is
// complete when the call returns.
#include "engine/neuron/neuron_buffer.h"

#include <cstring>

#include "engine/neuron/arrays.h"

namespace pjrt_neuron::engine::neuron {
namespace {

Status Deleted(int core) {
  return InvalidArgument("the buffer on NeuronCore " + std::to_string(core) + " has been deleted or donated");
}

EventRef Done() { return std::make_shared<CompletedEvent>(); }

}  // namespace

NeuronBuffer::NeuronBuffer(std::shared_ptr<Runtime> runtime, int core, std::string memory_kind, PJRT_Buffer_Type type,
                           std::vector<int64_t> dims, size_t bytes, std::shared_ptr<DeviceTensor> tensor,
                           std::vector<char> host)
    : runtime_(std::move(runtime)), core_(core), memory_kind_(std::move(memory_kind)), type_(type),
      dims_(std::move(dims)), bytes_(bytes), tensor_(std::move(tensor)), host_(std::move(host)) {
  for (size_t i = dims_.size(); i-- > 0;) minor_to_major_.push_back(static_cast<int64_t>(i));
}

void NeuronBuffer::FillFrom(std::shared_ptr<std::vector<char>> host, EventRef filled) {
  std::lock_guard<std::mutex> lock(mutex_);
  filled_host_ = std::move(host);
  filled_ = std::move(filled);
}

// Executions and reads are synchronous here, so a buffer still being filled is refused rather
// than waited for (the caller may be the one that sends the rest).
Status NeuronBuffer::CheckFilledLocked() {
  if (filled_ == nullptr) return Status::Ok();
  if (!filled_->IsReady()) {
    return FailedPrecondition("the buffer on NeuronCore " + std::to_string(core_) +
                              " is still being filled by a transfer manager (its last part has not arrived); "
                              "wait for its ready event");
  }
  PN_RETURN_IF_ERROR(filled_->Await());
  if (filled_host_ != nullptr) {
    host_ = *filled_host_;
    filled_host_.reset();
  }
  return Status::Ok();
}

Status NeuronBuffer::ReadAll(void* dst) {
  std::shared_ptr<DeviceTensor> tensor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deleted_) return Deleted(core_);
    PN_RETURN_IF_ERROR(CheckFilledLocked());
    if (bytes_ == 0) return Status::Ok();
    if (tensor_ == nullptr) {
      std::memcpy(dst, host_.data(), bytes_);
      return Status::Ok();
    }
    tensor = tensor_;
  }
  return tensor->Read(dst, 0, bytes_);
}

StatusOr<EventRef> NeuronBuffer::ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                                        size_t* required_size) {
  PN_RETURN_IF_ERROR(CheckDenseLayout(host_layout, dims_.size(), "a copy to the host"));
  if (required_size != nullptr) *required_size = bytes_;
  if (dst == nullptr) return Done();
  if (dst_size < bytes_) {
    return InvalidArgument("the destination holds " + std::to_string(dst_size) + " bytes, the buffer " +
                           std::to_string(bytes_));
  }
  PN_RETURN_IF_ERROR(ReadAll(dst));
  return Done();
}

StatusOr<EventRef> NeuronBuffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  if (offset < 0 || size < 0 || static_cast<size_t>(offset) + static_cast<size_t>(size) > bytes_) {
    return InvalidArgument("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
                           ") are outside the buffer's " + std::to_string(bytes_));
  }
  if (size == 0) return Done();
  std::shared_ptr<DeviceTensor> tensor;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (deleted_) return Deleted(core_);
    PN_RETURN_IF_ERROR(CheckFilledLocked());
    if (tensor_ == nullptr) {
      std::memcpy(dst, host_.data() + offset, static_cast<size_t>(size));
      return Done();
    }
    tensor = tensor_;
  }
  PN_RETURN_IF_ERROR(tensor->Read(dst, static_cast<size_t>(offset), static_cast<size_t>(size)));
  return Done();
}

StatusOr<std::unique_ptr<Buffer>> NeuronBuffer::CopyTo(int core, const std::string& memory_kind) {
  // Between cores through the host: the runtime copies device tensors within one core only.
  std::vector<char> staging(bytes_);
  PN_RETURN_IF_ERROR(ReadAll(staging.data()));
  PN_ASSIGN_OR_RETURN(std::unique_ptr<NeuronBuffer> copy,
                      MakeBuffer(runtime_, core, memory_kind, type_, dims_, staging.data(), "a copy between memories"));
  return std::unique_ptr<Buffer>(std::move(copy));
}

StatusOr<EventRef> NeuronBuffer::ReadyEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  return filled_ != nullptr ? filled_ : Done();
}

Status NeuronBuffer::GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) {
  std::memset(layout, 0, sizeof *layout);
  layout->struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  layout->type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout->tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout->tiled.minor_to_major = minor_to_major_.data();
  layout->tiled.minor_to_major_size = minor_to_major_.size();
  return Status::Ok();
}

void NeuronBuffer::Delete() {
  std::shared_ptr<DeviceTensor> freed;
  std::lock_guard<std::mutex> lock(mutex_);
  deleted_ = true;
  freed = std::move(tensor_);  // freed here, unless an execution still holds it
  host_.clear();
  host_.shrink_to_fit();
}

bool NeuronBuffer::IsDeleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return deleted_;
}

StatusOr<uintptr_t> NeuronBuffer::UnsafePointer() {
  return Unimplemented("the Neuron runtime gives no device addresses (nrt tensors are opaque)");
}

Status NeuronBuffer::IncreaseExternalReferenceCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deleted_) return Deleted(core_);
  external_references_ += 1;
  return Status::Ok();
}

Status NeuronBuffer::DecreaseExternalReferenceCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (external_references_ == 0) return FailedPrecondition("the buffer has no external references");
  external_references_ -= 1;
  return Status::Ok();
}

StatusOr<void*> NeuronBuffer::OpaqueDeviceMemoryPointer() {
  return Unimplemented("the Neuron runtime gives no device addresses (nrt tensors are opaque)");
}

StatusOr<std::shared_ptr<DeviceTensor>> NeuronBuffer::TensorForExecution() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deleted_) return Deleted(core_);
  PN_RETURN_IF_ERROR(CheckFilledLocked());
  return tensor_;
}

StatusOr<std::vector<char>> NeuronBuffer::HostBytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (deleted_) return Deleted(core_);
  PN_RETURN_IF_ERROR(CheckFilledLocked());
  return host_;
}

void NeuronBuffer::MarkDonated() {
  std::lock_guard<std::mutex> lock(mutex_);
  deleted_ = true;
  tensor_.reset();
}

StatusOr<std::unique_ptr<NeuronBuffer>> MakeBuffer(const std::shared_ptr<Runtime>& runtime, int core,
                                                   const std::string& memory_kind, PJRT_Buffer_Type type,
                                                   const std::vector<int64_t>& dims, const void* dense,
                                                   const std::string& purpose) {
  PN_ASSIGN_OR_RETURN(size_t bytes, DenseBytes(type, dims));
  std::shared_ptr<DeviceTensor> tensor;
  std::vector<char> host;
  if (memory_kind == "pinned_host") {
    host.resize(bytes);
    if (dense != nullptr && bytes > 0) std::memcpy(host.data(), dense, bytes);
  } else if (memory_kind != "device") {
    return InvalidArgument("the Neuron engine has no '" + memory_kind + "' memory");
  } else if (bytes > 0) {
    if (runtime == nullptr) return FailedPrecondition("this Neuron engine only compiles (no runtime session)");
    PN_ASSIGN_OR_RETURN(tensor, runtime->Allocate(core, bytes, ShapeText(type, dims) + " for " + purpose));
    if (dense != nullptr) PN_RETURN_IF_ERROR(tensor->Write(dense, 0, bytes));
  }
  return std::make_unique<NeuronBuffer>(runtime, core, memory_kind, type, dims, bytes, std::move(tensor),
                                        std::move(host));
}

}  // namespace pjrt_neuron::engine::neuron
