// The framework-process side of multi-process mode: an Engine whose cores, buffers and programs
// live in the instance daemon. Every call is a request on one of a small pool of connections.
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "common/tool_process.h"
#include "engine/remote/protocol.h"
#include "engine/remote/remote.h"

namespace pjrt_neuron::engine::remote {
namespace {

// A forked child (a DataLoader worker, say) inherits the session's connection; if it kept it
// open, a rank that died would look alive to its peers until its children exit. So children
// close their copies at fork, and their calls fail.
constexpr int kMaxSessions = 64;
std::atomic<int> g_session_fds[kMaxSessions];
std::atomic<bool> g_forked_child{false};

void CloseSessionsInChild() {
  g_forked_child = true;
  for (auto& slot : g_session_fds) {
    int fd = slot.exchange(-1);
    if (fd >= 0) close(fd);
  }
}

int RegisterSession(int fd) {
  static const bool registered = [] {
    for (auto& slot : g_session_fds) slot = -1;
    pthread_atfork(nullptr, nullptr, CloseSessionsInChild);
    return true;
  }();
  (void)registered;
  for (int i = 0; i < kMaxSessions; ++i) {
    int expected = -1;
    if (g_session_fds[i].compare_exchange_strong(expected, fd)) return i;
  }
  return -1;  // more clients than slots: those are not closed in children
}

// One socket to the daemon, with the shared memory its transfers use.
struct Connection {
  explicit Connection(int fd) : fd(fd) {}
  ~Connection() {
    if (fd >= 0) close(fd);
  }
  int fd;
  SharedWindow window;
  bool window_is_new = false;  // the daemon has not been given it yet

  // The window with room for `size` bytes, or nullptr: then the bytes go inline in the message.
  char* WindowFor(size_t size) {
    if (window.Holds(size)) return window.data();
    size_t rounded = size_t{1} << 20;
    while (rounded < size && rounded < kKeptWindowBytes) rounded <<= 1;
    if (rounded < size) rounded = (size + 4095) / 4096 * 4096;
    if (!window.Create(rounded)) return nullptr;
    window_is_new = true;
    return window.data();
  }
};

class Channel {
 public:
  Channel(std::string address, int primary_fd, int64_t session, std::string log_path)
      : address_(std::move(address)), primary_fd_(primary_fd), session_(session), log_path_(std::move(log_path)) {
    slot_ = RegisterSession(primary_fd);
  }
  ~Channel() {
    idle_.clear();
    // Closing ends the session: the daemon frees what this process held.
    if (slot_ < 0) {
      close(primary_fd_);
    } else if (int fd = g_session_fds[slot_].exchange(-1); fd >= 0) {
      close(fd);
    }
  }

  // Sends a request that gets no reply (IsOneWay).
  template <typename Request>
  void Send(const Request& request) {
    if (g_forked_child) return;
    std::unique_ptr<Connection> c = Take();
    if (c == nullptr) return;
    if (SendFrame(c->fd, EncodeRequest(request))) Give(std::move(c));
  }

  // Sends a one-way request with the next call instead of on its own: the daemon then wakes
  // once per call, not once more for each buffer released before it. At most kMaxDeferred
  // wait; the caller defers only small releases, so little daemon memory waits with them.
  template <typename Request>
  void Defer(const Request& request) {
    if (g_forked_child) return;
    std::string due;
    {
      std::lock_guard<std::mutex> lock(deferred_mutex_);
      AppendFrame(&deferred_, EncodeRequest(request));
      if (++deferred_count_ < kMaxDeferred) return;
      due.swap(deferred_);
      deferred_count_ = 0;
    }
    std::unique_ptr<Connection> c = Take();
    if (c != nullptr && SendFrames(c->fd, due)) Give(std::move(c));
  }
  static constexpr int kMaxDeferred = 64;

  // Sends a request and decodes its reply (which must hold no views: its bytes are gone).
  template <typename Reply, typename Request>
  StatusOr<Reply> Call(const Request& request) {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Lease());
    auto reply = CallOn(*c, EncodeRequest(request));
    Return(std::move(c));
    PN_RETURN_IF_ERROR(reply.status());
    return DecodeReply<Reply>(*reply);
  }

  // A connection for a call whose bulk bytes use its window; hand it back with Return.
  StatusOr<std::unique_ptr<Connection>> Lease() {
    if (g_forked_child) {
      return FailedPrecondition("this process was forked from the one that holds the NeuronCores; "
                                "a forked child cannot use them (start it with spawn instead)");
    }
    std::unique_ptr<Connection> c = Take();
    if (c == nullptr) return Gone();
    return c;
  }

  // The reply's bytes, status and all: DecodeReply reads them.
  StatusOr<std::string> CallOn(Connection& c, const std::string& request) {
    std::string reply;
    int pass_fd = c.window_is_new ? c.window.fd() : -1;
    std::string frames;
    {
      std::lock_guard<std::mutex> lock(deferred_mutex_);
      frames.swap(deferred_);
      deferred_count_ = 0;
    }
    bool sent;
    if (frames.empty()) {
      sent = SendFrame(c.fd, request, pass_fd);
    } else if (pass_fd >= 0) {  // the descriptor rides on the request's own first bytes
      sent = SendFrames(c.fd, frames) && SendFrame(c.fd, request, pass_fd);
    } else {
      AppendFrame(&frames, request);
      sent = SendFrames(c.fd, frames);
    }
    if (!sent || !ReceiveReply(c.fd, &reply)) {
      close(c.fd);
      c.fd = -1;
      return Gone();
    }
    c.window_is_new = false;
    return reply;
  }

  void Return(std::unique_ptr<Connection> c) {
    if (c->fd < 0) return;
    // The daemon drops a window this large after its one use, as we do.
    if (!c->window_is_new && !c->window.kept()) c->window.Reset();
    Give(std::move(c));
  }

 private:
  Status Gone() const {
    return Unavailable("the pjrt-neuron instance daemon that holds this job's NeuronCores went away (its log: " +
                       log_path_ + ")");
  }
  std::unique_ptr<Connection> Take() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    int fd = ConnectTo(address_);
    if (fd < 0) return nullptr;
    auto c = std::make_unique<Connection>(fd);
    Peer peer;
    if (!PeerOf(fd, &peer) || peer.uid != geteuid()) return nullptr;
    AttachRequest attach;
    attach.session = session_;
    std::string reply;
    if (!SendFrame(fd, EncodeRequest(attach)) || !ReceiveReply(fd, &reply)) return nullptr;
    if (!DecodeReply<EmptyReply>(reply).ok()) return nullptr;
    return c;
  }
  void Give(std::unique_ptr<Connection> c) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(c));
  }

  std::string address_;
  int primary_fd_;
  int64_t session_;
  std::string log_path_;
  int slot_ = -1;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::mutex deferred_mutex_;
  std::string deferred_;  // encoded one-way frames, sent before the next call's request
  int deferred_count_ = 0;
};

// A reply's bulk bytes: inline in the message, or in the connection's window.
std::string_view PlacedData(const PlacedBytes& bytes, const Connection& c) {
  if (bytes.placement == Placement::kInline) return bytes.data;
  if (c.window.data() == nullptr) return {};
  return std::string_view(c.window.data(), std::min<size_t>(static_cast<size_t>(bytes.window_bytes), c.window.size()));
}

// Where the daemon is to put the bytes of a reply: the window, when there is one.
Placement PlacementOf(const char* window) { return window != nullptr ? Placement::kWindow : Placement::kInline; }

Status MultiProcessOnly(const std::string& what) {
  return Unimplemented(what + " is not available in multi-process mode: the buffer lives in the instance daemon");
}

// A buffer whose memory is in the instance daemon: what needs its address is refused.
class DaemonHeldBuffer : public Buffer {
 public:
  StatusOr<uintptr_t> UnsafePointer() override { return MultiProcessOnly("a raw device pointer"); }
  Status IncreaseExternalReferenceCount() override { return MultiProcessOnly("an external reference"); }
  Status DecreaseExternalReferenceCount() override { return MultiProcessOnly("an external reference"); }
  StatusOr<void*> OpaqueDeviceMemoryPointer() override { return MultiProcessOnly("a device memory pointer"); }
};

class RemoteBuffer : public DaemonHeldBuffer {
 public:
  RemoteBuffer(std::shared_ptr<Channel> channel, BufferInfo info)
      : channel_(std::move(channel)), info_(std::move(info)) {}
  ~RemoteBuffer() override {
    ReleaseBufferRequest release;
    release.id = info_.id;
    if (info_.size <= kDeferredReleaseBytes) {
      channel_->Defer(release);
    } else {
      channel_->Send(release);
    }
  }
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
                            size_t* required_size) override {
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

  // The daemon checks the size and copies in one round trip.
  StatusOr<EventRef> CheckedToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout) override {
    return ToHost(dst, dst_size, host_layout, nullptr);
  }

  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override {
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

  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override {
    CopyToRequest request;
    request.buffer = info_.id;
    request.core = core;
    request.memory_kind = memory_kind;
    PN_ASSIGN_OR_RETURN(BufferInfo info, channel_->Call<BufferInfo>(request));
    return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, std::move(info)));
  }

  // The daemon answers only once the data is there.
  StatusOr<EventRef> ReadyEvent() override { return EventRef(std::make_shared<CompletedEvent>()); }

  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override {
    if (!info_.layout) return Unimplemented("the engine reports no layout for this buffer");
    info_.layout->Fill(layout);
    return Status::Ok();
  }

  void Delete() override {
    if (deleted_.exchange(true)) return;
    DeleteBufferRequest request;
    request.id = info_.id;
    channel_->Call<EmptyReply>(request);
  }
  bool IsDeleted() override { return deleted_; }

 private:
  std::shared_ptr<Channel> channel_;
  const BufferInfo info_;
  std::atomic<bool> deleted_{false};
};

// A transfer manager's buffer: its bytes gather in this process and reach the daemon in one
// transfer when the last part arrives; until then it is refused for use, like the Trainium
// engine's (executions and reads here are synchronous).
struct PendingFill {
  std::mutex mutex;
  std::unique_ptr<RemoteBuffer> buffer;  // once filled
  Status status;                         // an error set instead
  bool done = false;
  std::shared_ptr<PromiseEvent> ready = std::make_shared<PromiseEvent>();

  StatusOr<RemoteBuffer*> Filled(int core) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!done) {
      return FailedPrecondition("the buffer on NeuronCore " + std::to_string(core) +
                                " is still being filled by a transfer manager (its last part has not arrived); "
                                "wait for its ready event");
    }
    PN_RETURN_IF_ERROR(status);
    return buffer.get();
  }
};

class FilledRemoteBuffer : public DaemonHeldBuffer {
 public:
  FilledRemoteBuffer(std::shared_ptr<PendingFill> fill, int core, std::string memory_kind, PJRT_Buffer_Type type,
                     std::vector<int64_t> dims, size_t size)
      : fill_(std::move(fill)), core_(core), memory_kind_(std::move(memory_kind)), type_(type),
        dims_(std::move(dims)), size_(size) {}

  StatusOr<RemoteBuffer*> Filled() {
    if (deleted_) return InvalidArgument("the buffer has been deleted");
    return fill_->Filled(core_);
  }

  int core() override { return core_; }
  const std::string& memory_kind() override { return memory_kind_; }
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return dims_; }
  StatusOr<size_t> OnDeviceSizeInBytes() override { return size_; }
  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override {
    if (dst == nullptr && required_size != nullptr) {
      *required_size = size_;
      return EventRef(std::make_shared<CompletedEvent>());
    }
    PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
    return buffer->ToHost(dst, dst_size, host_layout, required_size);
  }
  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override {
    PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
    return buffer->CopyRawToHost(dst, offset, size);
  }
  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override {
    PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
    return buffer->CopyTo(core, memory_kind);
  }
  StatusOr<EventRef> ReadyEvent() override { return EventRef(fill_->ready); }
  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override {
    PN_ASSIGN_OR_RETURN(RemoteBuffer * buffer, Filled());
    return buffer->GetMemoryLayout(layout);
  }
  void Delete() override {
    if (deleted_.exchange(true)) return;
    auto buffer = fill_->Filled(core_);
    if (buffer.ok()) buffer.value()->Delete();
  }
  bool IsDeleted() override {
    if (deleted_) return true;
    auto buffer = fill_->Filled(core_);
    return buffer.ok() && buffer.value()->IsDeleted();  // donated to an execution
  }

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
StatusOr<RemoteBuffer*> RemoteBufferOf(Buffer* buffer) {
  if (auto* remote = dynamic_cast<RemoteBuffer*>(buffer)) return remote;
  if (auto* filled = dynamic_cast<FilledRemoteBuffer*>(buffer)) return filled->Filled();
  return InvalidArgument("an argument is not a buffer of this engine");
}

using UploadFn = std::function<StatusOr<TransferResult>(int core, const HostBufferSpec& spec)>;

struct StagedSlot {
  ShapeSpec shape;
  size_t bytes = 0;
  std::vector<char> staging;
  std::shared_ptr<PendingFill> fill = std::make_shared<PendingFill>();
  bool retrieved = false;
};

class RemoteTransferManager : public SlottedTransferManager<StagedSlot> {
 public:
  using Slot = StagedSlot;

  RemoteTransferManager(UploadFn upload, int core, std::string memory_kind, std::vector<Slot> slots)
      : SlottedTransferManager(std::move(slots)), upload_(std::move(upload)), core_(core),
        memory_kind_(std::move(memory_kind)) {}

  ~RemoteTransferManager() override {
    for (Slot& slot : slots_) Finish(slot, Status(ErrorCode::kAborted, "the transfer manager was destroyed before "
                                                                        "the buffer's last part"), nullptr);
  }

  StatusOr<EventRef> TransferData(int index, const void* data, int64_t offset, int64_t size, bool last) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    PN_RETURN_IF_ERROR(CheckTransferPart(index, slot->bytes, slot->fill->ready->IsReady(), data, offset, size));
    if (size > 0) std::memcpy(slot->staging.data() + offset, data, static_cast<size_t>(size));
    if (last) {
      HostBufferSpec spec;
      spec.data = slot->staging.data();
      spec.type = slot->shape.type;
      spec.dims = slot->shape.dims;
      spec.memory_kind = memory_kind_;
      auto uploaded = upload_(core_, spec);
      Status status = uploaded.status();
      std::unique_ptr<RemoteBuffer> buffer;
      if (uploaded.ok()) buffer.reset(dynamic_cast<RemoteBuffer*>(uploaded->buffer.release()));
      Finish(*slot, status, std::move(buffer));
      std::vector<char>().swap(slot->staging);
      PN_RETURN_IF_ERROR(status);
    }
    return EventRef(std::make_shared<CompletedEvent>());
  }

  StatusOr<std::unique_ptr<Buffer>> RetrieveBuffer(int index) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->retrieved) return FailedPrecondition("buffer " + std::to_string(index) + " was already retrieved");
    slot->retrieved = true;
    return std::unique_ptr<Buffer>(std::make_unique<FilledRemoteBuffer>(slot->fill, core_, memory_kind_, slot->shape.type,
                                                                        slot->shape.dims, slot->bytes));
  }

  Status SetBufferError(int index, ErrorCode code, const std::string& message) override {
    PN_ASSIGN_OR_RETURN(Slot * slot, SlotAt(index));
    if (slot->fill->ready->IsReady()) {
      return FailedPrecondition("buffer " + std::to_string(index) + " already had its last part (or an error)");
    }
    Finish(*slot, Status(code, message), nullptr);
    return Status::Ok();
  }

 private:
  static void Finish(Slot& slot, Status status, std::unique_ptr<RemoteBuffer> buffer) {
    {
      std::lock_guard<std::mutex> lock(slot.fill->mutex);
      if (slot.fill->done) return;
      slot.fill->done = true;
      slot.fill->status = status;
      slot.fill->buffer = std::move(buffer);
    }
    slot.fill->ready->Set(status);
  }

  UploadFn upload_;
  const int core_;
  const std::string memory_kind_;
};

class RemoteExecutable : public Executable {
 public:
  RemoteExecutable(std::shared_ptr<Channel> channel, ExecutableInfo info, const std::vector<int>& own_cores,
                   double peer_timeout_seconds)
      : channel_(std::move(channel)), info_(std::move(info)), peer_timeout_seconds_(peer_timeout_seconds) {
    for (int core : info_.cores) {
      if (std::find(own_cores.begin(), own_cores.end(), core) != own_cores.end()) local_cores_.push_back(core);
    }
  }
  ~RemoteExecutable() override {
    ReleaseExecutableRequest release;
    release.id = info_.id;
    channel_->Send(release);
  }

  std::string name() override { return info_.name; }
  int num_replicas() override { return info_.replicas; }
  int num_partitions() override { return info_.partitions; }
  const std::vector<OutputShape>& outputs() override { return info_.outputs; }
  // Only this process's cores: the others' arguments come from their own processes.
  std::vector<int> addressable_cores() override { return local_cores_; }

  StatusOr<std::string> Fingerprint() override { return QueryString(Query::kFingerprint); }
  StatusOr<std::string> Serialize() override { return QueryString(Query::kSerialize); }
  StatusOr<std::string> SerializedDeviceAssignment() override {
    return QueryString(Query::kSerializedDeviceAssignment);
  }
  StatusOr<Attributes> CostAnalysis() override {
    PN_ASSIGN_OR_RETURN(CostAnalysisReply reply, Ask<CostAnalysisReply>(Query::kCostAnalysis));
    return std::move(reply.attributes);
  }
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override {
    PN_ASSIGN_OR_RETURN(CodeSizeReply reply, Ask<CodeSizeReply>(Query::kSizeOfGeneratedCode));
    return reply.bytes;
  }
  StatusOr<CompiledMemoryStats> MemoryStats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!memory_stats_.has_value()) {
      PN_ASSIGN_OR_RETURN(MemoryStatsReply reply, Ask<MemoryStatsReply>(Query::kMemoryStats));
      memory_stats_ = reply.stats;
    }
    return *memory_stats_;
  }
  StatusOr<ProgramText> OptimizedProgram() override {
    PN_ASSIGN_OR_RETURN(OptimizedProgramReply reply, Ask<OptimizedProgramReply>(Query::kOptimizedProgram));
    return std::move(reply.program);
  }

  Status Execute(const ArgumentTable& args, const ExecuteOptions& options, int only_core,
                 ExecuteResult* result) override {
    if (options.num_send_ops > 0 || options.num_recv_ops > 0) {
      return Unimplemented("host send/recv callbacks are not available in multi-process mode");
    }
    std::vector<int> cores = only_core >= 0 ? std::vector<int>{only_core} : local_cores_;
    if (cores.size() != args.size()) return InvalidArgument("one argument list per NeuronCore is expected");
    ExecuteRequest request;
    request.executable = info_.id;
    request.launch_id = options.launch_id;
    request.non_donatable_input_indices.assign(options.non_donatable_input_indices.begin(),
                                               options.non_donatable_input_indices.end());
    request.timeout_seconds = peer_timeout_seconds_;
    request.cores = cores;
    std::vector<std::vector<RemoteBuffer*>> remote_args;
    for (size_t d = 0; d < args.size(); ++d) {
      const ArgumentRow list = args[d];
      std::vector<int64_t> ids;
      std::vector<RemoteBuffer*> buffers;
      for (Buffer* b : list) {
        PN_ASSIGN_OR_RETURN(RemoteBuffer * remote, RemoteBufferOf(b));
        ids.push_back(remote->id());
        buffers.push_back(remote);
      }
      request.args.push_back(std::move(ids));
      remote_args.push_back(std::move(buffers));
    }
    PN_ASSIGN_OR_RETURN(ExecuteReply reply, channel_->Call<ExecuteReply>(request));
    if (reply.cores.size() != cores.size()) return Internal(ExecuteReply::kMalformed);
    for (size_t d = 0; d < cores.size(); ++d) {
      OutputList<std::unique_ptr<Buffer>> outputs;
      for (BufferInfo& info : reply.cores[d].outputs) {
        outputs.push_back(std::make_unique<RemoteBuffer>(channel_, std::move(info)));
      }
      for (int64_t donated : reply.cores[d].donated) {
        if (donated >= 0 && donated < static_cast<int64_t>(remote_args[d].size())) remote_args[d][donated]->MarkDeleted();
      }
      result->outputs.push_back(std::move(outputs));
      result->completions.push_back(std::make_shared<CompletedEvent>());
    }
    return Status::Ok();
  }

  void Delete() override {
    deleted_ = true;
    DeleteExecutableRequest request;
    request.id = info_.id;
    channel_->Call<EmptyReply>(request);
  }
  bool IsDeleted() override { return deleted_; }

 private:
  template <typename Reply>
  StatusOr<Reply> Ask(Query what) {
    ExecutableQueryRequest request;
    request.executable = info_.id;
    request.what = what;
    return channel_->Call<Reply>(request);
  }
  StatusOr<std::string> QueryString(Query what) {
    PN_ASSIGN_OR_RETURN(QueryBytesReply reply, Ask<QueryBytesReply>(what));
    return std::move(reply.value);
  }

  std::shared_ptr<Channel> channel_;
  const ExecutableInfo info_;
  const double peer_timeout_seconds_;  // as the client was created with
  std::vector<int> local_cores_;
  std::mutex mutex_;
  std::optional<CompiledMemoryStats> memory_stats_;
  std::atomic<bool> deleted_{false};
};

class RemoteEngine : public Engine {
 public:
  RemoteEngine(std::shared_ptr<Channel> channel, std::string description, int num_cores, std::vector<int> own_cores,
               double peer_timeout_seconds)
      : channel_(std::move(channel)),
        description_(std::move(description)),
        num_cores_(num_cores),
        own_cores_(std::move(own_cores)),
        peer_timeout_seconds_(peer_timeout_seconds) {}

  std::string description() override { return description_; }
  int num_cores() override { return num_cores_; }

  StatusOr<TransferResult> BufferFromHost(int core, const HostBufferSpec& spec) override {
    if (spec.device_layout != nullptr) {
      return Unimplemented("a custom device layout is not available in multi-process mode");
    }
    // The bytes the strides reach; dense when no strides are given.
    int64_t element_bytes = 0;
    {
      int64_t elements = 1;
      for (int64_t d : spec.dims) elements *= d;
      PN_ASSIGN_OR_RETURN(element_bytes, ElementSize(spec.type));
      if (elements == 0) element_bytes = 0;
    }
    size_t span = element_bytes;
    if (spec.byte_strides != nullptr && spec.num_byte_strides == spec.dims.size()) {
      for (size_t i = 0; i < spec.dims.size() && span > 0; ++i) {
        if (spec.byte_strides[i] < 0) return Unimplemented("negative byte strides are not available in multi-process mode");
        span += static_cast<size_t>((spec.dims[i] - 1) * spec.byte_strides[i]);
      }
    } else {
      for (int64_t d : spec.dims) span *= d;
    }
    BufferFromHostRequest request;
    request.core = core;
    request.type = spec.type;
    request.dims = spec.dims;
    if (spec.byte_strides != nullptr) request.byte_strides.assign(spec.byte_strides, spec.byte_strides + spec.num_byte_strides);
    request.memory_kind = spec.memory_kind;
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
    char* window = span >= kSharedTransferBytes ? c->WindowFor(span) : nullptr;
    request.bytes.placement = PlacementOf(window);
    if (window != nullptr) {
      std::memcpy(window, spec.data, span);
      request.bytes.window_bytes = static_cast<int64_t>(span);
    } else {
      request.bytes.data = std::string_view(static_cast<const char*>(spec.data), span);
    }
    auto bytes = channel_->CallOn(*c, EncodeRequest(request));
    channel_->Return(std::move(c));
    PN_RETURN_IF_ERROR(bytes.status());
    PN_ASSIGN_OR_RETURN(BufferInfo info, DecodeReply<BufferInfo>(*bytes));
    TransferResult result;
    result.buffer = std::make_unique<RemoteBuffer>(channel_, std::move(info));
    return result;  // the bytes were copied before the call returned: the caller's buffer is free now
  }

  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims) override {
    CreateUninitializedRequest request;
    request.core = core;
    request.type = type;
    request.dims = dims;
    PN_ASSIGN_OR_RETURN(BufferInfo info, channel_->Call<BufferInfo>(request));
    return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, std::move(info)));
  }

  // Parts gather here; each buffer goes to the daemon in one transfer at its last part.
  StatusOr<std::unique_ptr<TransferManager>> CreateTransferManager(int core, const std::vector<ShapeSpec>& shapes,
                                                                    const std::string& memory_kind) override {
    std::vector<StagedSlot> slots(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      slots[i].shape = shapes[i];
      PN_ASSIGN_OR_RETURN(int64_t element_bytes, ElementSize(shapes[i].type));
      int64_t bytes = element_bytes;
      for (int64_t d : shapes[i].dims) bytes *= d;
      slots[i].bytes = static_cast<size_t>(bytes);
      slots[i].staging.resize(slots[i].bytes);
    }
    UploadFn upload = [this](int target, const HostBufferSpec& spec) { return BufferFromHost(target, spec); };
    return std::unique_ptr<TransferManager>(
        std::make_unique<RemoteTransferManager>(std::move(upload), core, memory_kind, std::move(slots)));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    CompileRequest request;
    request.format = program.format;
    request.code = std::string_view(program.code, program.code_size);
    request.options = options;
    return Loaded(channel_->Call<ExecutableInfo>(request));
  }

  StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                    const std::string* overridden_options) override {
    DeserializeRequest request;
    request.bytes = bytes;
    if (overridden_options != nullptr) request.options = *overridden_options;
    return Loaded(channel_->Call<ExecutableInfo>(request));
  }

  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) override {
    DefaultDeviceAssignmentRequest request;
    request.replicas = num_replicas;
    request.partitions = num_partitions;
    PN_ASSIGN_OR_RETURN(DefaultDeviceAssignmentReply reply, channel_->Call<DefaultDeviceAssignmentReply>(request));
    return std::move(reply.cores);
  }

 private:
  StatusOr<std::unique_ptr<Executable>> Loaded(StatusOr<ExecutableInfo> info) {
    PN_RETURN_IF_ERROR(info.status());
    return std::unique_ptr<Executable>(
        new RemoteExecutable(channel_, std::move(info.value()), own_cores_, peer_timeout_seconds_));
  }

  static StatusOr<int64_t> ElementSize(PJRT_Buffer_Type type) {
    switch (type) {
      case PJRT_Buffer_Type_S16: case PJRT_Buffer_Type_U16: case PJRT_Buffer_Type_F16: case PJRT_Buffer_Type_BF16:
        return 2;
      case PJRT_Buffer_Type_S32: case PJRT_Buffer_Type_U32: case PJRT_Buffer_Type_F32: return 4;
      case PJRT_Buffer_Type_S64: case PJRT_Buffer_Type_U64: case PJRT_Buffer_Type_F64: case PJRT_Buffer_Type_C64:
        return 8;
      case PJRT_Buffer_Type_C128: return 16;
      case PJRT_Buffer_Type_S4: case PJRT_Buffer_Type_U4: case PJRT_Buffer_Type_S2: case PJRT_Buffer_Type_U2:
      case PJRT_Buffer_Type_F4E2M1FN:
        return Unimplemented("sub-byte element types are not available in multi-process mode");
      default: return 1;
    }
  }

  std::shared_ptr<Channel> channel_;
  std::string description_;
  int num_cores_;
  std::vector<int> own_cores_;
  double peer_timeout_seconds_;
};

// The daemon's lock and log live in a directory of this user's own: the lock directory is
// shared by every user (as the cores are), and a file or link that another user planted there
// must not receive this user's log or decide who starts the daemon. The directory's descriptor;
// its path in `path`.
StatusOr<int> OpenPrivateDirectory(const std::string& lock_directory, std::string* path) {
  const unsigned uid = geteuid();
  *path = lock_directory + "/daemon-uid" + std::to_string(uid);
  if (mkdir(path->c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create the instance daemon's directory " + *path + ": " + std::strerror(errno));
  }
  int fd = open(path->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return Status(ErrorCode::kPermissionDenied, "the instance daemon's directory " + *path +
                                                    " is not a directory of this user (" + std::strerror(errno) +
                                                    "); remove it");
  }
  struct stat info {};
  std::string problem;
  if (fstat(fd, &info) != 0) {
    problem = std::strerror(errno);
  } else if (info.st_uid != uid) {
    problem = "it belongs to uid " + std::to_string(info.st_uid) + ", not to this user (uid " + std::to_string(uid) + ")";
  } else if ((info.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    problem = std::string("other users may enter it (mode ") + mode + ", not 0700)";
  }
  if (!problem.empty()) {
    close(fd);
    return Status(ErrorCode::kPermissionDenied, "refusing the instance daemon's directory " + *path + ": " + problem +
                                                    "; remove it");
  }
  return fd;
}

// A file of the private directory, never through a link.
StatusOr<int> OpenPrivateFile(int directory_fd, const std::string& directory, const char* name, int flags) {
  int fd = openat(directory_fd, name, flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot open " + directory + "/" + name + ": " + std::strerror(errno));
  return fd;
}

// Starts the daemon in its own session, so it outlives the process that started it.
Status SpawnDaemon(const ConnectOptions& options, const std::string& address, int log_fd) {
  const std::string library = PluginLibraryPath();
  const std::string executable = ToolProgramPath(library);
  if (access(executable.c_str(), X_OK) != 0) {
    return FailedPrecondition("the instance daemon program " + executable +
                              " is missing; reinstall pjrt-neuron or set PJRT_NEURON_INSTANCE_DAEMON");
  }
  ToolSpawn spawn;
  spawn.argv = {executable, library, address, std::to_string(options.num_cores), options.engine_library_path};
  spawn.log_fd = log_fd;
  spawn.new_session = true;
  PN_ASSIGN_OR_RETURN(pid_t pid, SpawnTool(spawn, "the instance daemon"));
  // Reaped by init after its parent, us, exits; until then a zombie at most.
  std::thread([pid] { int status; waitpid(pid, &status, 0); }).detach();
  return Status::Ok();
}

// A connection to this user's daemon; -1 when nobody listens. Another user's process at the
// address (it is a name anyone may take) is refused rather than sent this user's data.
StatusOr<int> ConnectToOwnDaemon(const std::string& address) {
  int fd = ConnectTo(address);
  if (fd < 0) return -1;
  Peer peer;
  if (PeerOf(fd, &peer) && peer.uid == geteuid()) return fd;
  close(fd);
  return Status(ErrorCode::kPermissionDenied,
                "the instance daemon's address " + address + " is held by process " + std::to_string(peer.pid) +
                    " of uid " + std::to_string(peer.uid) + ", not by a daemon of this user (uid " +
                    std::to_string(geteuid()) + "); refusing to send it this process's work");
}

// Connects, starting the daemon under a lock so that one process starts it.
StatusOr<int> ConnectOrSpawn(const ConnectOptions& options, const std::string& address, std::string* log_path) {
  PN_ASSIGN_OR_RETURN(int fd, ConnectToOwnDaemon(address));
  if (fd >= 0) return fd;
  std::string directory;
  PN_ASSIGN_OR_RETURN(int directory_fd, OpenPrivateDirectory(options.lock_directory, &directory));
  *log_path = directory + "/daemon.log";
  StatusOr<int> lock_fd = OpenPrivateFile(directory_fd, directory, "daemon.lock", O_RDWR);
  if (!lock_fd.ok()) {
    close(directory_fd);
    return lock_fd.status();
  }
  flock(*lock_fd, LOCK_EX);
  StatusOr<int> connected = ConnectToOwnDaemon(address);
  Status spawned = connected.status();
  if (connected.ok() && *connected < 0) {
    StatusOr<int> log_fd = OpenPrivateFile(directory_fd, directory, "daemon.log", O_WRONLY | O_APPEND);
    spawned = log_fd.ok() ? SpawnDaemon(options, address, *log_fd) : log_fd.status();
    if (log_fd.ok()) close(*log_fd);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (spawned.ok() && *connected < 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      connected = ConnectToOwnDaemon(address);
      if (!connected.ok()) spawned = connected.status();
    }
  }
  flock(*lock_fd, LOCK_UN);
  close(*lock_fd);
  close(directory_fd);
  PN_RETURN_IF_ERROR(spawned);
  if (*connected < 0) return Unavailable("the instance daemon did not start within 120 s; see " + *log_path);
  return *connected;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> ConnectInstanceEngine(const ConnectOptions& options,
                                                        std::vector<JobMember>* world) {
  const std::string address = DaemonAddress(options.instance_key);
  std::string log_path = options.lock_directory + "/daemon-uid" + std::to_string(geteuid()) + "/daemon.log";
  // A daemon that is shutting down refuses the hello; the next attempt starts a fresh one.
  for (int attempt = 0; attempt < 5; ++attempt) {
    PN_ASSIGN_OR_RETURN(int fd, ConnectOrSpawn(options, address, &log_path));
    HelloRequest hello;
    hello.pid = getpid();
    hello.process_index = options.process_index;
    hello.world_size = options.world_size;
    hello.cores = options.cores;
    hello.timeout_seconds = options.peer_timeout_seconds;
    std::string bytes;
    if (!SendFrame(fd, EncodeRequest(hello)) || !ReceiveReply(fd, &bytes)) {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    StatusOr<HelloReply> reply = DecodeReply<HelloReply>(bytes);
    if (!reply.ok()) {
      close(fd);
      return reply.status();
    }
    *world = std::move(reply->world);
    auto channel = std::make_shared<Channel>(address, fd, reply->session, log_path);
    return std::unique_ptr<Engine>(new RemoteEngine(channel, std::move(reply->description), reply->num_cores,
                                                    options.cores, options.peer_timeout_seconds));
  }
  return Unavailable("could not attach to the instance daemon; see " + log_path);
}

}  // namespace pjrt_neuron::engine::remote
