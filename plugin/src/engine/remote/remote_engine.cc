// The framework-process side of multi-process mode: an Engine whose cores, buffers and programs
// live in the instance daemon. Every call is a request on one of a small pool of connections.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/remote/protocol.h"
#include "engine/remote/remote.h"

extern char** environ;

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
  void Send(Writer& request) {
    if (g_forked_child) return;
    std::unique_ptr<Connection> c = Take();
    if (c == nullptr) return;
    if (SendFrame(c->fd, request.buffer())) Give(std::move(c));
  }

  // Sends a request and returns the reply after its status.
  StatusOr<std::string> Call(Writer& request) {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Lease());
    auto reply = CallOn(*c, request);
    Return(std::move(c));
    return reply;
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

  StatusOr<std::string> CallOn(Connection& c, Writer& request) {
    std::string reply;
    int pass_fd = c.window_is_new ? c.window.fd() : -1;
    if (!SendFrame(c.fd, request.buffer(), pass_fd) || !ReceiveFrame(c.fd, &reply)) {
      close(c.fd);
      c.fd = -1;
      return Gone();
    }
    c.window_is_new = false;
    Reader r(reply);
    Status status = ReadStatus(r);
    if (!status.ok()) return status;
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
    Writer attach;
    attach.u8(static_cast<uint8_t>(Op::kAttach)).i64(session_);
    std::string reply;
    if (!SendFrame(fd, attach.buffer()) || !ReceiveFrame(fd, &reply)) return nullptr;
    Reader r(reply);
    if (!ReadStatus(r).ok()) return nullptr;
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
};

// A reply's position after its status.
Reader AfterStatus(const std::string& reply) {
  Reader r(reply);
  ReadStatus(r);
  return r;
}

// A reply's bulk bytes: inline in the message, or in the connection's window.
const char* ReadPlacedBytes(Reader& r, const Connection& c, size_t* size) {
  if (static_cast<Placement>(r.u8()) == Placement::kInline) return r.view(size);
  *size = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(r.i64(), 0)), c.window.size());
  return c.window.data();
}

Status MultiProcessOnly(const std::string& what) {
  return Unimplemented(what + " is not available in multi-process mode: the buffer lives in the instance daemon");
}

class RemoteBuffer : public Buffer {
 public:
  RemoteBuffer(std::shared_ptr<Channel> channel, Reader& r) : channel_(std::move(channel)) {
    id_ = r.i64();
    core_ = static_cast<int>(r.i64());
    memory_kind_ = r.str();
    type_ = static_cast<PJRT_Buffer_Type>(r.i64());
    dims_ = r.ints();
    size_ = static_cast<size_t>(r.i64());
    has_layout_ = r.u8() != 0;
    if (has_layout_) layout_ = LayoutData::Read(r);
  }
  ~RemoteBuffer() override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kReleaseBuffer)).i64(id_);
    channel_->Send(w);
  }
  int64_t id() const { return id_; }
  void MarkDeleted() { deleted_ = true; }

  int core() override { return core_; }
  const std::string& memory_kind() override { return memory_kind_; }
  PJRT_Buffer_Type element_type() override { return type_; }
  const std::vector<int64_t>& dims() override { return dims_; }
  StatusOr<size_t> OnDeviceSizeInBytes() override { return size_; }

  StatusOr<EventRef> ToHost(void* dst, size_t dst_size, const PJRT_Buffer_MemoryLayout* host_layout,
                            size_t* required_size) override {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
    char* window = dst != nullptr && dst_size >= kSharedTransferBytes ? c->WindowFor(dst_size) : nullptr;
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kToHost)).i64(id_).u8(dst == nullptr ? 1 : 0).i64(static_cast<int64_t>(dst_size));
    w.u8(static_cast<uint8_t>(window != nullptr ? Placement::kWindow : Placement::kInline));
    w.u8(host_layout != nullptr ? 1 : 0);
    if (host_layout != nullptr) LayoutData::From(*host_layout).Write(w);
    auto reply = channel_->CallOn(*c, w);
    if (reply.ok()) {
      Reader r = AfterStatus(*reply);
      int64_t required = r.i64();
      size_t size = 0;
      const char* data = ReadPlacedBytes(r, *c, &size);
      if (required_size != nullptr) *required_size = static_cast<size_t>(required);
      if (dst != nullptr && data != nullptr) std::memcpy(dst, data, std::min(size, dst_size));
    }
    channel_->Return(std::move(c));
    PN_RETURN_IF_ERROR(reply.status());
    return EventRef(std::make_shared<CompletedEvent>());
  }

  StatusOr<EventRef> CopyRawToHost(void* dst, int64_t offset, int64_t size) override {
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
    char* window = size >= static_cast<int64_t>(kSharedTransferBytes) ? c->WindowFor(size) : nullptr;
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kCopyRawToHost)).i64(id_).i64(offset).i64(size);
    w.u8(static_cast<uint8_t>(window != nullptr ? Placement::kWindow : Placement::kInline));
    auto reply = channel_->CallOn(*c, w);
    if (reply.ok()) {
      Reader r = AfterStatus(*reply);
      size_t got = 0;
      const char* data = ReadPlacedBytes(r, *c, &got);
      if (data != nullptr) std::memcpy(dst, data, std::min<size_t>(got, size));
    }
    channel_->Return(std::move(c));
    PN_RETURN_IF_ERROR(reply.status());
    return EventRef(std::make_shared<CompletedEvent>());
  }

  StatusOr<std::unique_ptr<Buffer>> CopyTo(int core, const std::string& memory_kind) override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kCopyTo)).i64(id_).i64(core).str(memory_kind);
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, r));
  }

  // The daemon answers only once the data is there.
  StatusOr<EventRef> ReadyEvent() override { return EventRef(std::make_shared<CompletedEvent>()); }

  Status GetMemoryLayout(PJRT_Buffer_MemoryLayout* layout) override {
    if (!has_layout_) return Unimplemented("the engine reports no layout for this buffer");
    layout_.Fill(layout);
    return Status::Ok();
  }

  void Delete() override {
    if (deleted_.exchange(true)) return;
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kDeleteBuffer)).i64(id_);
    channel_->Call(w);
  }
  bool IsDeleted() override { return deleted_; }
  StatusOr<uintptr_t> UnsafePointer() override { return MultiProcessOnly("a raw device pointer"); }
  Status IncreaseExternalReferenceCount() override { return MultiProcessOnly("an external reference"); }
  Status DecreaseExternalReferenceCount() override { return MultiProcessOnly("an external reference"); }
  StatusOr<void*> OpaqueDeviceMemoryPointer() override { return MultiProcessOnly("a device memory pointer"); }

 private:
  std::shared_ptr<Channel> channel_;
  int64_t id_ = 0;
  int core_ = 0;
  std::string memory_kind_;
  PJRT_Buffer_Type type_ = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims_;
  size_t size_ = 0;
  bool has_layout_ = false;
  LayoutData layout_;
  std::atomic<bool> deleted_{false};
};

double PeerTimeoutSeconds() {
  const char* text = std::getenv("PJRT_NEURON_COLLECTIVE_TIMEOUT");
  if (text == nullptr || *text == '\0') return 300;
  double value = std::strtod(text, nullptr);
  return value > 0 ? value : 300;
}

class RemoteExecutable : public Executable {
 public:
  RemoteExecutable(std::shared_ptr<Channel> channel, Reader& r, const std::vector<int>& own_cores)
      : channel_(std::move(channel)) {
    id_ = r.i64();
    name_ = r.str();
    replicas_ = static_cast<int>(r.i64());
    partitions_ = static_cast<int>(r.i64());
    for (int core : r.ints<int>()) {
      if (std::find(own_cores.begin(), own_cores.end(), core) != own_cores.end()) local_cores_.push_back(core);
    }
    int64_t n = r.i64();
    for (int64_t i = 0; i < n && r.ok(); ++i) {
      OutputShape o;
      o.type = static_cast<PJRT_Buffer_Type>(r.i64());
      o.dims = r.ints();
      o.memory_kind = r.str();
      outputs_.push_back(std::move(o));
    }
  }
  ~RemoteExecutable() override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kReleaseExecutable)).i64(id_);
    channel_->Send(w);
  }

  std::string name() override { return name_; }
  int num_replicas() override { return replicas_; }
  int num_partitions() override { return partitions_; }
  const std::vector<OutputShape>& outputs() override { return outputs_; }
  // Only this process's cores: the others' arguments come from their own processes.
  std::vector<int> addressable_cores() override { return local_cores_; }

  StatusOr<std::string> Fingerprint() override { return QueryString(Query::kFingerprint); }
  StatusOr<std::string> Serialize() override { return QueryString(Query::kSerialize); }
  StatusOr<std::string> SerializedDeviceAssignment() override {
    return QueryString(Query::kSerializedDeviceAssignment);
  }
  StatusOr<Attributes> CostAnalysis() override {
    PN_ASSIGN_OR_RETURN(std::string reply, Ask(Query::kCostAnalysis));
    Reader r = AfterStatus(reply);
    return ReadAttributes(r);
  }
  StatusOr<int64_t> SizeOfGeneratedCodeInBytes() override {
    PN_ASSIGN_OR_RETURN(std::string reply, Ask(Query::kSizeOfGeneratedCode));
    return AfterStatus(reply).i64();
  }
  StatusOr<CompiledMemoryStats> MemoryStats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!memory_stats_.has_value()) {
      PN_ASSIGN_OR_RETURN(std::string reply, Ask(Query::kMemoryStats));
      Reader r = AfterStatus(reply);
      CompiledMemoryStats s;
      s.generated_code_size_in_bytes = r.i64();
      s.argument_size_in_bytes = r.i64();
      s.output_size_in_bytes = r.i64();
      s.alias_size_in_bytes = r.i64();
      s.temp_size_in_bytes = r.i64();
      s.peak_memory_in_bytes = r.i64();
      memory_stats_ = s;
    }
    return *memory_stats_;
  }
  StatusOr<ProgramText> OptimizedProgram() override {
    PN_ASSIGN_OR_RETURN(std::string reply, Ask(Query::kOptimizedProgram));
    Reader r = AfterStatus(reply);
    ProgramText text;
    text.format = r.str();
    text.code = r.str();
    return text;
  }

  StatusOr<ExecuteResult> Execute(const std::vector<std::vector<Buffer*>>& args, const ExecuteOptions& options,
                                  int only_core) override {
    if (options.num_send_ops > 0 || options.num_recv_ops > 0) {
      return Unimplemented("host send/recv callbacks are not available in multi-process mode");
    }
    std::vector<int> cores = only_core >= 0 ? std::vector<int>{only_core} : local_cores_;
    if (cores.size() != args.size()) return InvalidArgument("one argument list per NeuronCore is expected");
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kExecute)).i64(id_).i64(options.launch_id).ints(options.non_donatable_input_indices);
    w.f64(PeerTimeoutSeconds()).ints(cores);
    std::vector<std::vector<RemoteBuffer*>> remote_args;
    for (const auto& list : args) {
      std::vector<int64_t> ids;
      std::vector<RemoteBuffer*> buffers;
      for (Buffer* b : list) {
        auto* remote = dynamic_cast<RemoteBuffer*>(b);
        if (remote == nullptr) return InvalidArgument("an argument is not a buffer of this engine");
        ids.push_back(remote->id());
        buffers.push_back(remote);
      }
      w.ints(ids);
      remote_args.push_back(std::move(buffers));
    }
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    ExecuteResult result;
    for (size_t d = 0; d < cores.size(); ++d) {
      std::vector<std::unique_ptr<Buffer>> outputs;
      int64_t n = r.i64();
      for (int64_t i = 0; i < n && r.ok(); ++i) outputs.push_back(std::make_unique<RemoteBuffer>(channel_, r));
      for (int64_t donated : r.ints()) {
        if (donated >= 0 && donated < static_cast<int64_t>(remote_args[d].size())) remote_args[d][donated]->MarkDeleted();
      }
      result.outputs.push_back(std::move(outputs));
      result.completions.push_back(std::make_shared<CompletedEvent>());
    }
    if (!r.ok()) return Internal("malformed execution reply from the instance daemon");
    return result;
  }

  void Delete() override {
    deleted_ = true;
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kDeleteExecutable)).i64(id_);
    channel_->Call(w);
  }
  bool IsDeleted() override { return deleted_; }

 private:
  StatusOr<std::string> Ask(Query what) {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kExecutableQuery)).i64(id_).u8(static_cast<uint8_t>(what));
    return channel_->Call(w);
  }
  StatusOr<std::string> QueryString(Query what) {
    PN_ASSIGN_OR_RETURN(std::string reply, Ask(what));
    return AfterStatus(reply).str();
  }

  std::shared_ptr<Channel> channel_;
  int64_t id_ = 0;
  std::string name_;
  int replicas_ = 1;
  int partitions_ = 1;
  std::vector<int> local_cores_;
  std::vector<OutputShape> outputs_;
  std::mutex mutex_;
  std::optional<CompiledMemoryStats> memory_stats_;
  std::atomic<bool> deleted_{false};
};

class RemoteEngine : public Engine {
 public:
  RemoteEngine(std::shared_ptr<Channel> channel, std::string description, int num_cores, std::vector<int> own_cores)
      : channel_(std::move(channel)),
        description_(std::move(description)),
        num_cores_(num_cores),
        own_cores_(std::move(own_cores)) {}

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
    std::vector<int64_t> strides;
    if (spec.byte_strides != nullptr) strides.assign(spec.byte_strides, spec.byte_strides + spec.num_byte_strides);
    PN_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, channel_->Lease());
    char* window = span >= kSharedTransferBytes ? c->WindowFor(span) : nullptr;
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kBufferFromHost)).i64(core).i64(spec.type).ints(spec.dims).ints(strides);
    w.str(spec.memory_kind);
    if (window != nullptr) {
      std::memcpy(window, spec.data, span);
      w.u8(static_cast<uint8_t>(Placement::kWindow)).i64(static_cast<int64_t>(span));
    } else {
      w.u8(static_cast<uint8_t>(Placement::kInline)).bytes(spec.data, span);
    }
    auto reply = channel_->CallOn(*c, w);
    channel_->Return(std::move(c));
    PN_RETURN_IF_ERROR(reply.status());
    Reader r = AfterStatus(*reply);
    TransferResult result;
    result.buffer = std::make_unique<RemoteBuffer>(channel_, r);
    return result;  // the bytes were copied before the call returned: the caller's buffer is free now
  }

  StatusOr<std::unique_ptr<Buffer>> CreateUninitializedBuffer(int core, PJRT_Buffer_Type type,
                                                              const std::vector<int64_t>& dims) override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kCreateUninitialized)).i64(core).i64(type).ints(dims);
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    return std::unique_ptr<Buffer>(new RemoteBuffer(channel_, r));
  }

  StatusOr<std::unique_ptr<Executable>> Compile(const Program& program, const std::string& options) override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kCompile)).str(program.format).bytes(program.code, program.code_size).str(options);
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    return std::unique_ptr<Executable>(new RemoteExecutable(channel_, r, own_cores_));
  }

  StatusOr<std::unique_ptr<Executable>> Deserialize(const std::string& bytes,
                                                    const std::string* overridden_options) override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kDeserialize)).str(bytes).u8(overridden_options ? 1 : 0);
    w.str(overridden_options ? *overridden_options : std::string());
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    return std::unique_ptr<Executable>(new RemoteExecutable(channel_, r, own_cores_));
  }

  StatusOr<std::vector<int>> DefaultDeviceAssignment(int num_replicas, int num_partitions) override {
    Writer w;
    w.u8(static_cast<uint8_t>(Op::kDefaultDeviceAssignment)).i64(num_replicas).i64(num_partitions);
    PN_ASSIGN_OR_RETURN(std::string reply, channel_->Call(w));
    Reader r = AfterStatus(reply);
    return r.ints<int>();
  }

 private:
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
};

std::string OwnLibraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnLibraryPath), &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::string DaemonExecutable(const std::string& library) {
  if (const char* path = std::getenv("PJRT_NEURON_INSTANCE_DAEMON"); path != nullptr && *path != '\0') return path;
  return library.substr(0, library.rfind('/') + 1) + "pjrt-neuron-instanced";
}

// Starts the daemon in its own session, so it outlives the process that started it.
Status SpawnDaemon(const ConnectOptions& options, const std::string& address, const std::string& log_path) {
  const std::string library = OwnLibraryPath();
  const std::string executable = DaemonExecutable(library);
  if (access(executable.c_str(), X_OK) != 0) {
    return FailedPrecondition("the instance daemon program " + executable +
                              " is missing; reinstall pjrt-neuron or set PJRT_NEURON_INSTANCE_DAEMON");
  }
  std::vector<std::string> argv_text = {executable, library, address, std::to_string(options.num_cores),
                                        options.engine_library_path};
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  int error = posix_spawn(&pid, executable.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) return Internal("could not start the instance daemon " + executable + ": " + std::strerror(error));
  // Reaped by init after its parent, us, exits; until then a zombie at most.
  std::thread([pid] { int status; waitpid(pid, &status, 0); }).detach();
  return Status::Ok();
}

// Connects, starting the daemon under a lock so that one process starts it.
StatusOr<int> ConnectOrSpawn(const ConnectOptions& options, const std::string& address, const std::string& log_path) {
  int fd = ConnectTo(address);
  if (fd >= 0) return fd;
  const std::string lock_path = options.lock_directory + "/daemon.lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock_fd < 0) return Internal("cannot open " + lock_path + ": " + std::strerror(errno));
  flock(lock_fd, LOCK_EX);
  fd = ConnectTo(address);
  Status spawned = Status::Ok();
  if (fd < 0) {
    spawned = SpawnDaemon(options, address, log_path);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (spawned.ok() && fd < 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      fd = ConnectTo(address);
    }
  }
  flock(lock_fd, LOCK_UN);
  close(lock_fd);
  PN_RETURN_IF_ERROR(spawned);
  if (fd < 0) return Unavailable("the instance daemon did not start within 120 s; see " + log_path);
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> ConnectInstanceEngine(const ConnectOptions& options,
                                                        std::vector<JobMember>* world) {
  const std::string address = DaemonAddress(options.instance_key);
  const std::string log_path = options.lock_directory + "/daemon.log";
  // A daemon that is shutting down refuses the hello; the next attempt starts a fresh one.
  for (int attempt = 0; attempt < 5; ++attempt) {
    PN_ASSIGN_OR_RETURN(int fd, ConnectOrSpawn(options, address, log_path));
    Writer hello;
    hello.u8(static_cast<uint8_t>(Op::kHello)).i64(getpid()).i64(options.process_index).i64(options.world_size);
    hello.ints(options.cores).f64(options.peer_timeout_seconds);
    std::string reply;
    if (!SendFrame(fd, hello.buffer()) || !ReceiveFrame(fd, &reply)) {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    Reader r(reply);
    Status status = ReadStatus(r);
    if (!status.ok()) {
      close(fd);
      return status;
    }
    std::string description = r.str();
    int num_cores = static_cast<int>(r.i64());
    int64_t session = r.i64();
    int64_t size = r.i64();
    world->clear();
    for (int64_t i = 0; i < size && r.ok(); ++i) {
      JobMember m;
      m.process_index = static_cast<int>(r.i64());
      m.pid = static_cast<int>(r.i64());
      m.cores = r.ints<int>();
      world->push_back(std::move(m));
    }
    if (!r.ok()) {
      close(fd);
      return Internal("malformed hello reply from the instance daemon");
    }
    auto channel = std::make_shared<Channel>(address, fd, session, log_path);
    return std::unique_ptr<Engine>(new RemoteEngine(channel, description, num_cores, options.cores));
  }
  return Unavailable("could not attach to the instance daemon; see " + log_path);
}

}  // namespace pjrt_neuron::engine::remote
