// The simulator engine's buffers (sim_buffer.h).
#include "engine/sim/sim_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/element_sizes.h"
#include "engine/sim/engine_library.h"
#include "engine/sim/sim_event.h"

namespace pjrt_neuron::engine::sim {
namespace {

// The engine copies to the host on its worker threads, where page faults on untouched
// destination memory (a fresh numpy array, say) made 32 MiB copies 20 times slower than into
// touched memory. Faulting the pages in here first costs one pass.
constexpr size_t kPrefaultBytes = size_t{1} << 20;

void PrefaultForWrite(void* dst, size_t size) {
  if (dst == nullptr || size < kPrefaultBytes) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(dst) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(dst) + size) / page * page;
  if (end <= begin) return;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return;
  // Kernels before 5.14: write each page's first byte back to itself.
  for (uintptr_t p = begin; p < end; p += page) {
    volatile char* byte = reinterpret_cast<char*>(p);
    *byte = *byte;
  }
}

// Whether `layout` is the dense major-to-minor layout of a rank-`rank` array (no tiles).
bool IsDenseDefault(const PJRT_Buffer_MemoryLayout& layout, size_t rank) {
  if (layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled) return false;
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout.tiled;
  if (tiled.num_tiles != 0 || tiled.minor_to_major_size != rank) return false;
  for (size_t i = 0; i < rank; ++i) {
    if (tiled.minor_to_major[i] != static_cast<int64_t>(rank - 1 - i)) return false;
  }
  return true;
}

// The dimension order, most major first, of a dense `layout` that permutes a rank-`rank`
// array's dimensions; empty for the default order, tiles, or anything else.
std::vector<int64_t> DensePermutation(const PJRT_Buffer_MemoryLayout& layout, size_t rank) {
  if (layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled || IsDenseDefault(layout, rank)) return {};
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout.tiled;
  if (tiled.num_tiles != 0 || tiled.minor_to_major_size != rank) return {};
  std::vector<int64_t> major_first(tiled.minor_to_major, tiled.minor_to_major + rank);
  std::reverse(major_first.begin(), major_first.end());
  std::vector<bool> seen(rank, false);
  for (int64_t d : major_first) {
    if (d < 0 || size_t(d) >= rank || seen[d]) return {};
    seen[d] = true;
  }
  return major_first;
}

// Writes the row-major `src` of `dims` into `dst` with its dimensions in `major_first` order.
void Permute(const char* src, char* dst, const std::vector<int64_t>& dims, const std::vector<int64_t>& major_first,
             size_t element_bytes) {
  const size_t rank = dims.size();
  std::vector<int64_t> src_strides(rank, 1);  // in elements
  for (size_t d = rank; d-- > 1;) src_strides[d - 1] = src_strides[d] * dims[d];
  std::vector<int64_t> index(rank, 0);  // over dst's order
  int64_t total = 1;
  for (int64_t n : dims) total *= n;
  for (int64_t out = 0; out < total; ++out) {
    int64_t from = 0;
    for (size_t k = 0; k < rank; ++k) from += index[k] * src_strides[major_first[k]];
    std::memcpy(dst + out * element_bytes, src + from * element_bytes, element_bytes);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < dims[major_first[k]]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

size_t OwnCopyElementBytes(PJRT_Buffer_Type type) { return IsFloat8(type) ? 0 : WholeElementBytes(type); }

SimBuffer::SimBuffer(const CpuClient* client, PJRT_Buffer* buffer)
    : client_(client), api_(client->api()), buffer_(buffer) {
  INNER_ARGS(PJRT_Buffer_ElementType_Args, type);
  type.buffer = buffer_;
  if (TakeError(api_, api_->PJRT_Buffer_ElementType(&type)).ok()) type_ = type.type;
  INNER_ARGS(PJRT_Buffer_Dimensions_Args, dims);
  dims.buffer = buffer_;
  if (TakeError(api_, api_->PJRT_Buffer_Dimensions(&dims)).ok()) dims_.assign(dims.dims, dims.dims + dims.num_dims);
}

SimBuffer::SimBuffer(const CpuClient* client, PJRT_Buffer* buffer, std::shared_ptr<OutputTable> outputs,
                     size_t index, int core)
    : client_(client),
      api_(client->api()),
      buffer_(buffer),
      type_(outputs->shapes[index].type),
      core_(core),
      outputs_(std::move(outputs)),
      output_index_(index) {}

SimBuffer::~SimBuffer() {
  INNER_ARGS(PJRT_Buffer_Destroy_Args, args);
  args.buffer = buffer_;
  TakeError(api_, api_->PJRT_Buffer_Destroy(&args));
}

int SimBuffer::core() {
  if (core_ < 0) {
    INNER_ARGS(PJRT_Buffer_Device_Args, args);
    args.buffer = buffer_;
    if (TakeError(api_, api_->PJRT_Buffer_Device(&args)).ok()) core_ = client_->CoreOf(args.device);
  }
  return core_;
}

const std::string& SimBuffer::memory_kind() {
  if (outputs_ && !outputs_->shapes[output_index_].memory_kind.empty()) return outputs_->shapes[output_index_].memory_kind;
  if (memory_kind_.empty()) {
    INNER_ARGS(PJRT_Buffer_Memory_Args, args);
    args.buffer = buffer_;
    memory_kind_ = TakeError(api_, api_->PJRT_Buffer_Memory(&args)).ok() ? client_->MemoryKind(args.memory) : "device";
  }
  return memory_kind_;
}

StatusOr<size_t> SimBuffer::OnDeviceSizeInBytes() {
  if (outputs_) {
    int64_t known = outputs_->sizes[output_index_].load(std::memory_order_relaxed);
    if (known >= 0) return static_cast<size_t>(known);
  }
  INNER_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, args);
  args.buffer = buffer_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_OnDeviceSizeInBytes(&args)));
  if (outputs_) {
    outputs_->sizes[output_index_].store(static_cast<int64_t>(args.on_device_size_in_bytes),
                                         std::memory_order_relaxed);
  }
  return args.on_device_size_in_bytes;
}

StatusOr<EventRef> SimBuffer::ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                                     size_t* required_size) {
  if (dst != nullptr && (host_layout == nullptr || IsDenseDefault(*host_layout, dims().size())) &&
      CopiedDirectly(dst, dst_size, required_size)) {
    return EventRef(std::make_shared<CompletedEvent>());
  }
  // xla-cpu-pjrt ignores a permuted host layout of a row-major buffer and writes row-major
  // bytes, silently: the plugin permutes them itself, on every build alike. (A buffer in a
  // layout of its own, as JAX places with one, is the engine's to copy.)
  const size_t element_bytes = WholeElementBytes(type_);
  if (host_layout != nullptr && element_bytes != 0) {
    std::vector<int64_t> major_first = DensePermutation(*host_layout, dims().size());
    PJRT_Buffer_MemoryLayout own;
    if (!major_first.empty() && GetMemoryLayout(&own).ok() && IsDenseDefault(own, dims().size())) {
      size_t bytes = element_bytes;
      for (int64_t n : dims()) bytes *= size_t(n);
      if (required_size != nullptr) *required_size = bytes;
      if (dst == nullptr) return EventRef(std::make_shared<CompletedEvent>());
      if (dst_size < bytes) {
        return InvalidArgument("PJRT_Buffer_ToHostBuffer: the destination holds " + std::to_string(dst_size) +
                               " bytes; the array needs " + std::to_string(bytes));
      }
      std::vector<char> row_major(bytes);
      PN_ASSIGN_OR_RETURN(EventRef read, ToHost(row_major.data(), bytes, nullptr, nullptr));
      if (read) PN_RETURN_IF_ERROR(read->Await());
      Permute(row_major.data(), static_cast<char*>(dst), dims(), major_first, element_bytes);
      return EventRef(std::make_shared<CompletedEvent>());
    }
  }
  INNER_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = buffer_;
  args.host_layout = const_cast<PJRT_Buffer_MemoryLayout*>(host_layout);
  args.dst = dst;
  args.dst_size = dst_size;
  PrefaultForWrite(dst, dst_size);
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_ToHostBuffer(&args)));
  if (required_size != nullptr) *required_size = args.dst_size;
  return WrapEvent(api_, args.event);
}

StatusOr<EventRef> SimBuffer::CopyRawToHost(void* dst, int64_t offset, int64_t size) {
  INNER_ARGS(PJRT_Buffer_CopyRawToHost_Args, args);
  args.buffer = buffer_;
  args.dst = dst;
  args.offset = offset;
  args.transfer_size = size;
  PrefaultForWrite(dst, static_cast<size_t>(size));
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_CopyRawToHost(&args)));
  return WrapEvent(api_, args.event);
}

StatusOr<std::unique_ptr<Buffer>> SimBuffer::CopyTo(int core, const std::string& memory_kind) {
  INNER_ARGS(PJRT_Buffer_CopyToMemory_Args, args);
  args.buffer = buffer_;
  PN_ASSIGN_OR_RETURN(args.dst_memory, client_->memory(core, memory_kind));
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_CopyToMemory(&args)));
  return std::unique_ptr<Buffer>(std::make_unique<SimBuffer>(client_, args.dst_buffer));
}

// Copies a ready buffer in the dense default layout straight from its memory (simulated HBM
// is host memory), held against donation meanwhile. The engine's own copy hands the work to
// its thread pool and the caller waits for the hop: 70 us for 4 KiB (profiled). False where
// the engine must copy: sub-byte types, a buffer not ready or failed, a tiled or permuted
// layout, too small a destination.
bool SimBuffer::CopiedDirectly(void* dst, size_t dst_size, size_t* required_size) {
  const size_t element_size = OwnCopyElementBytes(type_);
  if (element_size == 0) return false;
  size_t bytes = element_size;
  for (int64_t d : dims()) bytes *= static_cast<size_t>(d);
  if (bytes == 0 || dst_size < bytes || !ReadyWithoutError() || !DenseDefaultLayout()) return false;
  INNER_ARGS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, hold);
  hold.buffer = buffer_;
  if (!TakeError(api_, api_->PJRT_Buffer_IncreaseExternalReferenceCount(&hold)).ok()) return false;
  INNER_ARGS(PJRT_Buffer_UnsafePointer_Args, pointer);
  pointer.buffer = buffer_;
  const bool copied = TakeError(api_, api_->PJRT_Buffer_UnsafePointer(&pointer)).ok() && pointer.buffer_pointer != 0;
  if (copied) std::memcpy(dst, reinterpret_cast<const void*>(pointer.buffer_pointer), bytes);
  INNER_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, release);
  release.buffer = buffer_;
  TakeError(api_, api_->PJRT_Buffer_DecreaseExternalReferenceCount(&release));
  if (copied && required_size != nullptr) *required_size = bytes;
  return copied;
}

bool SimBuffer::ReadyWithoutError() {
  INNER_ARGS(PJRT_Buffer_ReadyEvent_Args, ready);
  ready.buffer = buffer_;
  if (!TakeError(api_, api_->PJRT_Buffer_ReadyEvent(&ready)).ok() || ready.event == nullptr) return false;
  INNER_ARGS(PJRT_Event_IsReady_Args, is_ready);
  is_ready.event = ready.event;
  bool usable = TakeError(api_, api_->PJRT_Event_IsReady(&is_ready)).ok() && is_ready.is_ready;
  if (usable) {
    INNER_ARGS(PJRT_Event_Error_Args, error);
    error.event = ready.event;
    usable = TakeError(api_, api_->PJRT_Event_Error(&error)).ok();
  }
  INNER_ARGS(PJRT_Event_Destroy_Args, destroy);
  destroy.event = ready.event;
  TakeError(api_, api_->PJRT_Event_Destroy(&destroy));
  return usable;
}

bool SimBuffer::DenseDefaultLayout() {
  PJRT_Buffer_MemoryLayout layout;
  return GetMemoryLayout(&layout).ok() && IsDenseDefault(layout, dims().size());
}

StatusOr<EventRef> SimBuffer::ReadyEvent() {
  INNER_ARGS(PJRT_Buffer_ReadyEvent_Args, args);
  args.buffer = buffer_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_ReadyEvent(&args)));
  return WrapEvent(api_, args.event);
}

Status SimBuffer::GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) {
  INNER_ARGS(PJRT_Buffer_GetMemoryLayout_Args, args);
  args.buffer = buffer_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_GetMemoryLayout(&args)));
  *layout = args.layout;
  return Status::Ok();
}

void SimBuffer::Delete() {
  INNER_ARGS(PJRT_Buffer_Delete_Args, args);
  args.buffer = buffer_;
  TakeError(api_, api_->PJRT_Buffer_Delete(&args));
}

bool SimBuffer::IsDeleted() {
  INNER_ARGS(PJRT_Buffer_IsDeleted_Args, args);
  args.buffer = buffer_;
  if (!TakeError(api_, api_->PJRT_Buffer_IsDeleted(&args)).ok()) return true;
  return args.is_deleted;
}

StatusOr<uintptr_t> SimBuffer::UnsafePointer() {
  INNER_ARGS(PJRT_Buffer_UnsafePointer_Args, args);
  args.buffer = buffer_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_UnsafePointer(&args)));
  return args.buffer_pointer;
}

Status SimBuffer::IncreaseExternalReferenceCount() {
  INNER_ARGS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, args);
  args.buffer = buffer_;
  return TakeError(api_, api_->PJRT_Buffer_IncreaseExternalReferenceCount(&args));
}

Status SimBuffer::DecreaseExternalReferenceCount() {
  INNER_ARGS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, args);
  args.buffer = buffer_;
  return TakeError(api_, api_->PJRT_Buffer_DecreaseExternalReferenceCount(&args));
}

StatusOr<void*> SimBuffer::OpaqueDeviceMemoryPointer() {
  INNER_ARGS(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, args);
  args.buffer = buffer_;
  PN_RETURN_IF_ERROR(TakeError(api_, api_->PJRT_Buffer_OpaqueDeviceMemoryDataPointer(&args)));
  return args.device_memory_ptr;
}

}  // namespace pjrt_neuron::engine::sim
