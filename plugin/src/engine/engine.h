// The Engine interface: what a NeuronCore backend must do. Implementations: sim/ (XLA's CPU
// compiler, loaded at run time), remote/ (the instance daemon's) and neuron/ (neuronx-cc and
// the Neuron runtime); factory.h picks one.
//
// Engines speak PJRT's plain-data vocabulary (element type numbers, memory layouts,
// named values) because both engines already use it; they own their own handles.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "common/inline_vector.h"
#include "common/status.h"
#include "pjrt_c_api.h"

namespace pjrt_neuron::engine {

struct Attribute {
  std::string name;
  std::variant<std::string, int64_t, std::vector<int64_t>, float, bool> value;
};
using Attributes = std::vector<Attribute>;

// An engine's own PJRT object and the API it belongs to, so that PJRT extensions the engine
// offers (the simulator's XLA CPU plugin) can be forwarded to it. Both null where the engine
// has no PJRT plugin underneath (the instance daemon's, the Neuron runtime's).
template <typename Handle>
struct Native {
  const PJRT_Api* api = nullptr;
  Handle* handle = nullptr;
};

// Completion of asynchronous engine work: a transfer, an execution, a ready buffer.
class Event {
 public:
  virtual ~Event() = default;
  virtual bool IsReady() = 0;
  virtual Status Await() = 0;
  // Runs `done` exactly once, possibly on another thread, possibly before returning.
  virtual void OnReady(std::function<void(Status)> done) = 0;
};
using EventRef = std::shared_ptr<Event>;

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual int core() = 0;
  virtual const std::string& memory_kind() = 0;  // "device" or "pinned_host"
  virtual PJRT_Buffer_Type element_type() = 0;
  virtual const std::vector<int64_t>& dims() = 0;
  virtual StatusOr<size_t> OnDeviceSizeInBytes() = 0;
  // Copies to `dst`; with dst == nullptr only reports the size needed in *required_size.
  virtual StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                                    size_t* required_size) = 0;
  // Copies to `dst` after checking that dst_size holds the bytes. An engine whose every call is
  // a round trip (remote) does both in one.
  virtual StatusOr<EventRef> CheckedToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout) {
    size_t required = 0;
    PN_ASSIGN_OR_RETURN(EventRef ignored, ToHost(nullptr, 0, host_layout, &required));
    (void)ignored;
    if (dst_size < required) {
      return InvalidArgument("dst_size is " + std::to_string(dst_size) + " bytes but the buffer needs " +
                             std::to_string(required));
    }
    return ToHost(dst, dst_size, host_layout, nullptr);
  }
  virtual StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) = 0;
  virtual StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) = 0;
  virtual StatusOr<EventRef> ReadyEvent() = 0;
  // Fills `layout` (whose lifetime is the buffer's) with the device layout.
  virtual Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) = 0;
  virtual void Delete() = 0;
  virtual bool IsDeleted() = 0;
  virtual StatusOr<uintptr_t> UnsafePointer() = 0;
  virtual Status IncreaseExternalReferenceCount() = 0;
  virtual Status DecreaseExternalReferenceCount() = 0;
  virtual StatusOr<void*> OpaqueDeviceMemoryPointer() = 0;
  virtual Native<PJRT_Buffer> NativeBuffer() { return {}; }
};

struct HostBufferSpec {
  const void* data = nullptr;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  const int64_t* byte_strides = nullptr;  // nullptr: dense, major-to-minor
  size_t num_byte_strides = 0;
  PJRT_HostBufferSemantics semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  PJRT_Buffer_MemoryLayout* device_layout = nullptr;
  std::string memory_kind = "device";
};

struct TransferResult {
  std::unique_ptr<Buffer> buffer;
  EventRef done_with_host_buffer;  // may be null when the engine is done on return
};

struct OutputShape {
  PJRT_Buffer_Type type;
  std::vector<int64_t> dims;
  std::string memory_kind;
};

// A caller's array of indices, read in place for the duration of a call.
struct IndexView {
  const int64_t* data = nullptr;
  size_t size = 0;
  const int64_t* begin() const { return data; }
  const int64_t* end() const { return data + size; }
};

struct ExecuteOptions {
  int launch_id = 0;
  IndexView non_donatable_input_indices;
  // Host send/recv callbacks pass through untouched: same ABI on both sides.
  PJRT_SendCallbackInfo** send_callbacks = nullptr;
  PJRT_RecvCallbackInfo** recv_callbacks = nullptr;
  size_t num_send_ops = 0;
  size_t num_recv_ops = 0;
};

// One device's arguments, as the caller laid them out.
class ArgumentRow {
 public:
  ArgumentRow(Buffer* const* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  Buffer* operator[](size_t i) const { return data_[i]; }
  Buffer* const* begin() const { return data_; }
  Buffer* const* end() const { return data_ + size_; }

 private:
  Buffer* const* data_;
  size_t size_;
};

// An execution's arguments: row d holds device d's, `per_device` of them, in one array.
class ArgumentTable {
 public:
  ArgumentTable(Buffer* const* data, size_t devices, size_t per_device)
      : data_(data), devices_(devices), per_device_(per_device) {}
  size_t size() const { return devices_; }
  ArgumentRow operator[](size_t d) const { return ArgumentRow(data_ + d * per_device_, per_device_); }

 private:
  Buffer* const* data_;
  size_t devices_;
  size_t per_device_;
};

// Lists sized for the usual run (a few devices, a few outputs) cost no allocation per call.
template <typename T>
using DeviceList = InlineVector<T, 2>;
template <typename T>
using OutputList = InlineVector<T, 4>;

struct ExecuteResult {
  DeviceList<OutputList<std::unique_ptr<Buffer>>> outputs;  // [device][output]
  DeviceList<EventRef> completions;                         // [device]
};

struct ShapeSpec {
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
};

// Buffers filled piecewise from the host (PJRT_AsyncHostToDeviceTransferManager).
class TransferManager {
 public:
  virtual ~TransferManager() = default;
  virtual size_t buffer_count() = 0;
  virtual StatusOr<size_t> BufferSize(int index) = 0;
  // Copies `size` bytes to `offset` of buffer `index`; the event fires when `data` may be reused.
  virtual StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) = 0;
  // The buffer, ready once its last transfer is done (or failed by SetBufferError).
  virtual StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) = 0;
  virtual Status SetBufferError(int index, ErrorCode code, const std::string& message) = 0;
};

// What the Trainium and multi-process engines' transfer managers share: buffers held in slots
// (each with its `bytes`), indices checked, and the checks on every part (CheckTransferPart).
template <typename Slot>
class SlottedTransferManager : public TransferManager {
 public:
  explicit SlottedTransferManager(std::vector<Slot> slots) : slots_(std::move(slots)) {}
  size_t buffer_count() override { return slots_.size(); }
  StatusOr<size_t> BufferSize(int index) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    return slot->bytes;
  }

 protected:
  StatusOr<Slot*> SlotAt(int index) {
    if (index < 0 || static_cast<size_t>(index) >= slots_.size()) {
      return Status(ErrorCode::kInvalidArgument, "buffer index " + std::to_string(index) + " is not in [0, " +
                                                     std::to_string(slots_.size()) + ")");
    }
    return &slots_[index];
  }
  std::vector<Slot> slots_;
};

// A part of buffer `index` must fit the buffer and come before its last part (`finished`).
inline Status CheckTransferPart(int index, size_t buffer_bytes, bool finished, const void* data, int64_t offset,
                                int64_t size) {
  if (finished) {
    return Status(ErrorCode::kFailedPrecondition,
                  "buffer " + std::to_string(index) + " already had its last part (or an error)");
  }
  if (offset < 0 || size < 0 || static_cast<size_t>(offset) + static_cast<size_t>(size) > buffer_bytes) {
    return Status(ErrorCode::kInvalidArgument, "bytes [" + std::to_string(offset) + ", " +
                                                   std::to_string(offset + size) + ") are outside buffer " +
                                                   std::to_string(index) + "'s " + std::to_string(buffer_bytes));
  }
  if (size > 0 && data == nullptr) return Status(ErrorCode::kInvalidArgument, "the data is null");
  return Status::Ok();
}

struct CompiledMemoryStats {
  int64_t generated_code_size_in_bytes = 0;
  int64_t argument_size_in_bytes = 0;
  int64_t output_size_in_bytes = 0;
  int64_t alias_size_in_bytes = 0;
  int64_t temp_size_in_bytes = 0;
  int64_t peak_memory_in_bytes = 0;
};

struct CoreMemoryStats {
  int64_t bytes_in_use = 0;
  int64_t bytes_limit = 0;  // 0: not known
};

struct ProgramText {
  std::string format;
  std::string code;
};

class Executable {
 public:
  virtual ~Executable() = default;
  virtual std::string name() = 0;
  virtual int num_replicas() = 0;
  virtual int num_partitions() = 0;
  virtual const std::vector<OutputShape>& outputs() = 0;
  virtual std::vector<int> addressable_cores() = 0;
  virtual StatusOr<std::string> Fingerprint() = 0;
  virtual StatusOr<Attributes> CostAnalysis() = 0;
  virtual StatusOr<int64_t> SizeOfGeneratedCodeInBytes() = 0;
  virtual StatusOr<CompiledMemoryStats> MemoryStats() = 0;
  virtual StatusOr<std::string> Serialize() = 0;
  // The program after optimisation, as the engine reports it.
  virtual StatusOr<ProgramText> OptimizedProgram() = 0;
  virtual StatusOr<std::string> SerializedDeviceAssignment() = 0;
  // args[d][i]: argument i on device d of the device assignment; or one list for `only_core`.
  // Fills `result` (empty on entry): written in place, as moving its inline lists costs more
  // than the rest of what the plugin does per call.
  virtual Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                         ExecuteResult* result) = 0;
  // Whether one-core launches of different programs under one launch id meet in their
  // collectives; false where the engine matches a launch's cores by program.
  virtual bool CollectivesMeetAcrossPrograms() { return true; }
  virtual void Delete() = 0;
  virtual bool IsDeleted() = 0;
  virtual Native<PJRT_Executable> NativeExecutable() { return {}; }
};

struct Program {
  std::string format;  // "hlo", "hlo_with_config" or "mlir"
  const char* code = nullptr;
  size_t code_size = 0;
};

// A process of a multi-process job, as the instance daemon lists it.
struct JobMember {
  int process_index = 0;
  int pid = 0;
  std::vector<int> cores;  // the instance's core indices
};

// A key-value store that the processes of a job share (JAX's distributed service hands one to
// PJRT_Client_Create), for agreeing on values such as the collectives' root address.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual StatusOr<std::string> Get(const std::string& key, int timeout_ms) = 0;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
};

struct EngineOptions {
  int num_cores = 2;
  // The engine's number for its first core (the rest follow): in a multi-process job on the
  // Neuron runtime, this process's cores keep their numbers in the job.
  int first_core = 0;
  std::vector<int> job_cores;  // every core of the job, when this engine is one process's part
  std::string library_path;  // the engine's shared library; empty: the engine finds it
  Attributes passthrough;    // options the engine knows itself
  bool compile_in_process = false;  // the compile helper's own engine (PJRT_NEURON_COMPILE_ISOLATION)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string description() = 0;   // for the platform version string
  virtual bool simulated() const { return true; }  // false: real NeuronCores (the Neuron runtime)
  virtual int num_cores() = 0;
  static constexpr const char* kMemoryKinds[] = {"device", "pinned_host"};
  virtual StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) = 0;
  virtual StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                                      const std::vector<int64_t>& dims) = 0;
  virtual StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) = 0;
  virtual StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                            const std::string* overridden_options) = 0;
  // Whether a caller's serialized executable can be loaded without ending this process (the
  // simulator asks its compile helper first); the engine's compile cache entries, which carry
  // a checksum, are not asked.
  virtual Status CheckDeserializable(const std::string& bytes, const std::string* overridden_options) {
    return Status::Ok();
  }
  virtual StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) = 0;
  virtual StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                            const std::string& memory_kind) {
    return Status(ErrorCode::kUnimplemented, "this engine has no asynchronous host-to-device transfers");
  }
  // PJRT's alias buffers: a buffer on `core` whose contents another buffer supplies later,
  // through the opaque `fulfill` handle the engine hands out with it.
  struct AliasBuffer {
    std::unique_ptr<Buffer> buffer;
    void* fulfill = nullptr;
  };
  virtual StatusOr<AliasBuffer> CreateAliasBuffer(int core, const std::string& memory_kind, PJRT_Buffer_Type type,
                                                  const std::vector<int64_t>& dims) {
    return Status(ErrorCode::kUnimplemented, "this engine has no alias buffers (the simulator in one process has)");
  }
  // `target` null with a non-OK `code`: the alias fails with that error.
  virtual Status FulfillAliasBuffer(void* fulfill, Buffer* target, ErrorCode code, const std::string& message) {
    return Status(ErrorCode::kUnimplemented, "this engine has no alias buffers");
  }
  // The HBM figures of one core as the hardware counts them; UNIMPLEMENTED where the engine
  // has none (the simulator: core's own accounting is exact there).
  virtual StatusOr<CoreMemoryStats> CoreMemory(int core) {
    return Status(ErrorCode::kUnimplemented, "this engine reports no per-core memory figures");
  }
  virtual Native<PJRT_Client> NativeClient() { return {}; }
};


}  // namespace pjrt_neuron::engine

namespace pjrt_neuron::engine {

// An event completed later, once, by Set(): a buffer whose data arrive in parts.
class PromiseEvent : public Event {
 public:
  bool IsReady() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return ready_;
  }
  Status Await() override {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return ready_; });
    return status_;
  }
  void OnReady(std::function<void(Status)> done) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready_) {
      waiting_.push_back(std::move(done));
      return;
    }
    Status status = status_;
    lock.unlock();
    done(status);
  }
  // Only the first call counts.
  void Set(Status status) {
    std::vector<std::function<void(Status)>> waiting;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ready_) return;
      ready_ = true;
      status_ = status;
      waiting.swap(waiting_);
    }
    changed_.notify_all();
    for (auto& done : waiting) done(status);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool ready_ = false;
  Status status_;
  std::vector<std::function<void(Status)>> waiting_;
};

// An event that is complete from the start: results the engine produced synchronously.
class CompletedEvent : public Event {
 public:
  explicit CompletedEvent(Status status = Status::Ok()) : status_(std::move(status)) {}
  bool IsReady() override { return true; }
  Status Await() override { return status_; }
  void OnReady(std::function<void(Status)> done) override { done(status_); }

 private:
  Status status_;
};

}  // namespace pjrt_neuron::engine
