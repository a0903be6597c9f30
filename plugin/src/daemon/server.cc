// The instance daemon: one process per simulated instance that owns every NeuronCore's engine, as
// the Neuron driver owns the real cores. Framework processes of a multi-process job attach to it,
// so a collective program runs inside one engine client, on XLA's own collective implementation.
//
// Executions of a program whose cores span several processes are gang-scheduled: the k-th
// execution on each core waits until every core's k-th request has arrived, then all run as one
// engine execution. Waiting is bounded, and a process that exits fails its peers at once.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "engine/engine.h"
#include "hlo/collective_program.h"
#include "engine/remote/protocol.h"
#include "daemon/daemon.h"
#include "engine/sim/sim_engine.h"

namespace pjrt_neuron::daemon {

using namespace engine;
using namespace engine::remote;
namespace {

using Clock = std::chrono::steady_clock;

struct ServedExecutable {
  std::unique_ptr<Executable> executable;
  std::string program_key;  // equal for the same program compiled or loaded by any process
  // Equal for programs whose executions meet: the same program, or programs whose collectives
  // correspond one to one (CollectiveSignature).
  std::string gang_key;
  bool has_collectives = false;
  std::vector<int> cores;
};

struct Session {
  int id = 0;
  int pid = 0;
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;
  bool alive = true;
  int world = -1;
  int64_t next_id = 1;
  std::map<int64_t, std::shared_ptr<Buffer>> buffers;
  std::map<int64_t, std::shared_ptr<ServedExecutable>> executables;
};

struct World {
  int id = 0;
  int size = 0;
  std::map<int, Session*> members;  // by process index
  bool complete() const { return static_cast<int>(members.size()) == size; }
  // Once every process has attached, the world takes no one else, even after members leave:
  // a new job's process must not join the one that is ending.
  bool formed = false;
};

struct Gang {
  std::vector<int> cores;  // every core of the program, in its device-assignment order
  std::map<int, std::vector<std::shared_ptr<Buffer>>> args;
  std::map<int, std::shared_ptr<ServedExecutable>> executables;  // each core's process's program
  std::shared_ptr<ServedExecutable> executable;
  ExecuteOptions options;
  bool done = false;
  Status status;
  std::map<int, std::vector<std::unique_ptr<Buffer>>> outputs;
};

bool HasCollectives(const std::string& program) {
  for (const char* op : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                         "collective-broadcast"}) {
    if (program.find(op) != std::string::npos) return true;
  }
  return false;
}

Status NoWindow(int64_t bytes) {
  return Status(ErrorCode::kResourceExhausted, "the instance daemon has no shared memory for a transfer of " + std::to_string(bytes) +
                           " bytes: mapping the process's window failed (out of memory?)");
}

// Bulk bytes of a reply: inline, or only their size when they were written into the window.
void WritePlacedBytes(Writer& out, bool in_window, const std::string& inline_data, int64_t window_bytes) {
  if (in_window) {
    out.u8(static_cast<uint8_t>(Placement::kWindow)).i64(window_bytes);
  } else {
    out.u8(static_cast<uint8_t>(Placement::kInline)).str(inline_data);
  }
}

std::string CoreList(const std::vector<int>& cores) {
  std::string out;
  for (int c : cores) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

class Server {
 public:
  Server(std::unique_ptr<Engine> engine, int listen_fd, double idle_seconds)
      : engine_(std::move(engine)), listen_fd_(listen_fd), idle_seconds_(idle_seconds) {}

  int Run() {
    auto idle_since = Clock::now();
    while (true) {
      pollfd p{listen_fd_, POLLIN, 0};
      int ready = poll(&p, 1, 500);
      if (ready > 0) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          std::lock_guard<std::mutex> lock(mutex_);
          ++connections_;
          std::thread([this, fd] { Serve(fd); }).detach();
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (connections_ > 0) {
        idle_since = Clock::now();
      } else if (std::chrono::duration<double>(Clock::now() - idle_since).count() > idle_seconds_) {
        // Stop listening before leaving, so a process that arrives now starts a new daemon.
        close(listen_fd_);
        return 0;
      }
    }
  }

 private:
  void Serve(int fd) {
    std::string request;
    Session* session = nullptr;
    bool primary = false;
    if (ReceiveFrame(fd, &request)) {
      Reader r(request);
      Op op = static_cast<Op>(r.u8());
      Writer reply;
      if (op == Op::kHello) {
        primary = true;
        session = Hello(r, reply);
      } else if (op == Op::kAttach) {
        session = Attach(r, reply);
      } else {
        WriteStatus(reply, InvalidArgument("the first message must be hello or attach"));
      }
      if (!SendFrame(fd, reply.buffer())) session = primary ? session : nullptr;
      SharedWindow window;
      int window_fd = -1;
      while (session != nullptr && ReceiveFrame(fd, &request, &window_fd)) {
        if (window_fd >= 0) window.Adopt(window_fd);
        Writer out;
        Handle(*session, request, out, window);
        if (!window.kept()) window.Reset();  // used once, as the process does
        if (!request.empty() && IsOneWay(static_cast<Op>(request[0]))) continue;
        if (!SendFrame(fd, out.buffer())) break;
      }
    }
    close(fd);
    if (primary && session != nullptr) EndSession(session);
    std::lock_guard<std::mutex> lock(mutex_);
    --connections_;
  }

  Session* Hello(Reader& r, Writer& reply) {
    auto session = std::make_unique<Session>();
    session->pid = static_cast<int>(r.i64());
    session->process_index = static_cast<int>(r.i64());
    session->world_size = static_cast<int>(r.i64());
    session->cores = r.ints<int>();
    double timeout = r.f64();
    if (!r.ok()) {
      WriteStatus(reply, InvalidArgument("malformed hello"));
      return nullptr;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    session->id = next_session_++;
    Session* s = session.get();
    sessions_[s->id] = std::move(session);
    // Join the first forming world of this size that lacks our process index.
    World* world = nullptr;
    for (auto& [id, w] : worlds_) {
      if (!w->formed && w->size == s->world_size && w->members.count(s->process_index) == 0) {
        world = w.get();
        break;
      }
    }
    if (world == nullptr) {
      auto w = std::make_unique<World>();
      w->id = next_world_++;
      w->size = s->world_size;
      world = w.get();
      worlds_[w->id] = std::move(w);
    }
    world->members[s->process_index] = s;
    s->world = world->id;
    if (world->complete()) world->formed = true;
    changed_.notify_all();
    auto deadline = Clock::now() + std::chrono::duration<double>(timeout);
    while (!world->formed && s->alive) {
      if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !world->formed) {
        std::string missing;
        for (int i = 0; i < world->size; ++i) {
          if (world->members.count(i) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
        }
        world->members.erase(s->process_index);
        s->world = -1;  // left the world already; its session end must not touch it again
        s->alive = false;
        WriteStatus(reply, Status(ErrorCode::kDeadlineExceeded,
                                  "process(es) " + missing + " of " + std::to_string(world->size) +
                                      " never attached to the NeuronCores within " + std::to_string(int(timeout)) +
                                      " s (PJRT_NEURON_COLLECTIVE_TIMEOUT); check that every rank started, on this "
                                      "host and with the same PJRT_NEURON_LOCK_DIR (a simulated instance is one host)"));
        return s;  // its connection closes and ends the session
      }
    }
    WriteStatus(reply, Status::Ok());
    reply.str(engine_->description()).i64(engine_->num_cores()).i64(s->id).i64(world->size);
    for (auto& [index, member] : world->members) reply.i64(index).i64(member->pid).ints(member->cores);
    return s;
  }

  Session* Attach(Reader& r, Writer& reply) {
    int id = static_cast<int>(r.i64());
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !it->second->alive) {
      WriteStatus(reply, FailedPrecondition("no live session " + std::to_string(id)));
      return nullptr;
    }
    WriteStatus(reply, Status::Ok());
    return it->second.get();
  }

  void EndSession(Session* s) {
    std::lock_guard<std::mutex> lock(mutex_);
    s->alive = false;
    auto world = worlds_.find(s->world);
    // Peers waiting for this process in a collective fail now instead of at their deadline.
    // Later arrivals find its cores unheld and fail too (RunAsGang), so the gangs can go.
    for (auto it = gangs_.begin(); it != gangs_.end();) {
      Gang& gang = *it->second;
      bool involved = std::any_of(gang.cores.begin(), gang.cores.end(), [&](int core) {
        return std::find(s->cores.begin(), s->cores.end(), core) != s->cores.end();
      });
      if (!involved || gang.done) {
        ++it;
        continue;
      }
      gang.done = true;
      gang.status = Status(ErrorCode::kAborted,
                           "process " + std::to_string(s->process_index) + " (pid " + std::to_string(s->pid) +
                               ", NeuronCore(s) " + CoreList(s->cores) +
                               ") exited before joining this collective execution");
      gang.args.clear();
      it = gangs_.erase(it);
    }
    s->buffers.clear();
    s->executables.clear();
    if (world != worlds_.end()) {
      auto member = world->second->members.find(s->process_index);
      if (member != world->second->members.end() && member->second == s) world->second->members.erase(member);
      if (world->second->members.empty()) {
        const std::string job = "world " + std::to_string(world->first) + " ";
        for (auto it = sequence_numbers_.lower_bound(job); it != sequence_numbers_.end() && it->first.rfind(job, 0) == 0;) {
          it = sequence_numbers_.erase(it);
        }
        worlds_.erase(world);
      }
    }
    changed_.notify_all();
    sessions_.erase(s->id);
  }

  // Registers a buffer the engine made; returns its id in the session.
  int64_t Keep(Session& s, std::unique_ptr<Buffer> buffer) {
    int64_t id = s.next_id++;
    s.buffers[id] = std::shared_ptr<Buffer>(std::move(buffer));
    return id;
  }

  void WriteBufferInfo(Writer& w, int64_t id, Buffer& b) {
    auto size = b.OnDeviceSizeInBytes();
    w.i64(id).i64(b.core()).str(b.memory_kind()).i64(b.element_type()).ints(b.dims()).i64(size.ok() ? *size : 0);
    PJRT_Buffer_MemoryLayout layout;
    Status has_layout = b.GetMemoryLayout(&layout);
    w.u8(has_layout.ok() ? 1 : 0);
    if (has_layout.ok()) LayoutData::From(layout).Write(w);
  }

  std::shared_ptr<Buffer> FindBuffer(Session& s, int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = s.buffers.find(id);
    return it == s.buffers.end() ? nullptr : it->second;
  }

  std::shared_ptr<ServedExecutable> FindExecutable(Session& s, int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = s.executables.find(id);
    return it == s.executables.end() ? nullptr : it->second;
  }

  void ReplyExecutable(Session& s, StatusOr<std::unique_ptr<Executable>> compiled, Writer& out) {
    if (!compiled.ok()) return WriteStatus(out, compiled.status());
    auto served = std::make_shared<ServedExecutable>();
    served->executable = std::move(compiled.value());
    Executable& e = *served->executable;
    auto optimized = e.OptimizedProgram();
    served->has_collectives = !optimized.ok() || HasCollectives(optimized->code);
    auto fingerprint = e.Fingerprint();
    Sha256 hash;
    hash.Update(fingerprint.ok() && !fingerprint->empty() ? *fingerprint : optimized.ok() ? optimized->code : e.name());
    served->program_key = hash.Digest();
    served->gang_key = served->program_key;
    served->cores = e.addressable_cores();
    if (served->has_collectives && optimized.ok()) {
      bool matchable = false;
      std::string signature = hlo::CollectiveSignature(optimized->code, optimized->format, &matchable);
      if (matchable) {
        Sha256 collectives;
        collectives.Update("collectives " + CoreList(served->cores) + " " + std::to_string(e.num_replicas()) + "x" +
                           std::to_string(e.num_partitions()) + " " + signature);
        served->gang_key = collectives.Digest();
      }
    }
    int64_t id;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      id = s.next_id++;
      s.executables[id] = served;
    }
    WriteStatus(out, Status::Ok());
    out.i64(id).str(e.name()).i64(e.num_replicas()).i64(e.num_partitions()).ints(served->cores);
    out.i64(static_cast<int64_t>(e.outputs().size()));
    for (const OutputShape& o : e.outputs()) out.i64(o.type).ints(o.dims).str(o.memory_kind);
  }

  void Handle(Session& s, const std::string& request, Writer& out, const SharedWindow& window) {
    Reader r(request);
    Op op = static_cast<Op>(r.u8());
    switch (op) {
      case Op::kBufferFromHost: {
        HostBufferSpec spec;
        int core = static_cast<int>(r.i64());
        spec.type = static_cast<PJRT_Buffer_Type>(r.i64());
        spec.dims = r.ints();
        std::vector<int64_t> strides = r.ints();
        spec.memory_kind = r.str();
        size_t size = 0;
        if (static_cast<Placement>(r.u8()) == Placement::kInline) {
          spec.data = r.view(&size);
        } else {
          size = static_cast<size_t>(r.i64());
          if (!window.Holds(size)) return WriteStatus(out, NoWindow(size));
          spec.data = window.data();
        }
        if (!r.ok()) return WriteStatus(out, InvalidArgument("malformed transfer"));
        if (!strides.empty()) {
          spec.byte_strides = strides.data();
          spec.num_byte_strides = strides.size();
        }
        spec.semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
        auto transfer = engine_->BufferFromHost(core, spec);
        if (!transfer.ok()) return WriteStatus(out, transfer.status());
        if (transfer->done_with_host_buffer) transfer->done_with_host_buffer->Await();
        Buffer& b = *transfer->buffer;
        int64_t id;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          id = Keep(s, std::move(transfer->buffer));
        }
        WriteStatus(out, Status::Ok());
        return WriteBufferInfo(out, id, b);
      }
      case Op::kCreateUninitialized: {
        int core = static_cast<int>(r.i64());
        auto type = static_cast<PJRT_Buffer_Type>(r.i64());
        std::vector<int64_t> dims = r.ints();
        auto buffer = engine_->CreateUninitializedBuffer(core, type, dims);
        if (!buffer.ok()) return WriteStatus(out, buffer.status());
        Buffer& b = **buffer;
        int64_t id;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          id = Keep(s, std::move(buffer.value()));
        }
        WriteStatus(out, Status::Ok());
        return WriteBufferInfo(out, id, b);
      }
      case Op::kToHost: {
        auto buffer = FindBuffer(s, r.i64());
        bool query_only = r.u8() != 0;
        int64_t dst_size = r.i64();
        bool to_window = static_cast<Placement>(r.u8()) == Placement::kWindow;
        bool has_layout = r.u8() != 0;
        LayoutData layout_data;
        if (has_layout) layout_data = LayoutData::Read(r);
        if (!r.ok() || buffer == nullptr || dst_size < 0) return WriteStatus(out, InvalidArgument("unknown buffer"));
        if (to_window && !window.Holds(static_cast<size_t>(dst_size))) {
          return WriteStatus(out, NoWindow(dst_size));
        }
        PJRT_Buffer_MemoryLayout layout;
        if (has_layout) layout_data.Fill(&layout);
        std::string data(query_only || to_window ? 0 : dst_size, '\0');
        char* dst = query_only ? nullptr : to_window ? window.data() : data.data();
        size_t required = 0;
        auto event = buffer->ToHost(dst, query_only ? 0 : dst_size, has_layout ? &layout : nullptr, &required);
        if (!event.ok()) return WriteStatus(out, event.status());
        if (*event) {
          Status done = (*event)->Await();
          if (!done.ok()) return WriteStatus(out, done);
        }
        WriteStatus(out, Status::Ok());
        out.i64(static_cast<int64_t>(required));
        return WritePlacedBytes(out, to_window, data, dst_size);
      }
      case Op::kCopyRawToHost: {
        auto buffer = FindBuffer(s, r.i64());
        int64_t offset = r.i64();
        int64_t size = r.i64();
        bool to_window = static_cast<Placement>(r.u8()) == Placement::kWindow;
        if (!r.ok() || buffer == nullptr || size < 0) return WriteStatus(out, InvalidArgument("unknown buffer"));
        if (to_window && !window.Holds(static_cast<size_t>(size))) {
          return WriteStatus(out, NoWindow(size));
        }
        std::string data(to_window ? 0 : size, '\0');
        auto event = buffer->CopyRawToHost(to_window ? window.data() : data.data(), offset, size);
        if (!event.ok()) return WriteStatus(out, event.status());
        Status done = *event ? (*event)->Await() : Status::Ok();
        if (!done.ok()) return WriteStatus(out, done);
        WriteStatus(out, Status::Ok());
        return WritePlacedBytes(out, to_window, data, size);
      }
      case Op::kCopyTo: {
        auto buffer = FindBuffer(s, r.i64());
        int core = static_cast<int>(r.i64());
        std::string kind = r.str();
        if (!r.ok() || buffer == nullptr) return WriteStatus(out, InvalidArgument("unknown buffer"));
        auto copy = buffer->CopyTo(core, kind);
        if (!copy.ok()) return WriteStatus(out, copy.status());
        if (auto ready = (*copy)->ReadyEvent(); ready.ok() && *ready) (*ready)->Await();
        Buffer& b = **copy;
        int64_t id;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          id = Keep(s, std::move(copy.value()));
        }
        WriteStatus(out, Status::Ok());
        return WriteBufferInfo(out, id, b);
      }
      case Op::kReleaseBuffer:
      case Op::kDeleteBuffer: {
        int64_t id = r.i64();
        std::shared_ptr<Buffer> buffer;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          auto it = s.buffers.find(id);
          if (it != s.buffers.end()) {
            buffer = it->second;
            if (op == Op::kReleaseBuffer) s.buffers.erase(it);
          }
        }
        if (buffer && op == Op::kDeleteBuffer) buffer->Delete();
        return WriteStatus(out, Status::Ok());
      }
      case Op::kCompile: {
        Program program;
        program.format = r.str();
        std::string code = r.str();
        std::string options = r.str();
        if (!r.ok()) return WriteStatus(out, InvalidArgument("malformed compile request"));
        program.code = code.data();
        program.code_size = code.size();
        return ReplyExecutable(s, engine_->Compile(program, options), out);
      }
      case Op::kDeserialize: {
        std::string bytes = r.str();
        bool has_options = r.u8() != 0;
        std::string options = r.str();
        if (!r.ok()) return WriteStatus(out, InvalidArgument("malformed deserialize request"));
        return ReplyExecutable(s, engine_->Deserialize(bytes, has_options ? &options : nullptr), out);
      }
      case Op::kExecutableQuery: return Query(s, r, out);
      case Op::kExecute: return Execute(s, r, out);
      case Op::kReleaseExecutable:
      case Op::kDeleteExecutable: {
        int64_t id = r.i64();
        std::shared_ptr<ServedExecutable> executable;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          auto it = s.executables.find(id);
          if (it != s.executables.end()) {
            executable = it->second;
            if (op == Op::kReleaseExecutable) s.executables.erase(it);
          }
        }
        if (executable && op == Op::kDeleteExecutable) executable->executable->Delete();
        return WriteStatus(out, Status::Ok());
      }
      case Op::kDefaultDeviceAssignment: {
        int replicas = static_cast<int>(r.i64());
        int partitions = static_cast<int>(r.i64());
        auto assignment = engine_->DefaultDeviceAssignment(replicas, partitions);
        if (!assignment.ok()) return WriteStatus(out, assignment.status());
        WriteStatus(out, Status::Ok());
        out.ints(*assignment);
        return;
      }
      default: return WriteStatus(out, InvalidArgument("unknown request " + std::to_string(int(op))));
    }
  }

  void Query(Session& s, Reader& r, Writer& out) {
    auto executable = FindExecutable(s, r.i64());
    auto what = static_cast<remote::Query>(r.u8());
    if (!r.ok() || executable == nullptr) return WriteStatus(out, InvalidArgument("unknown executable"));
    Executable& e = *executable->executable;
    auto reply_string = [&](StatusOr<std::string> value) {
      if (!value.ok()) return WriteStatus(out, value.status());
      WriteStatus(out, Status::Ok());
      out.str(*value);
    };
    switch (what) {
      case Query::kFingerprint: return reply_string(e.Fingerprint());
      case Query::kSerialize: return reply_string(e.Serialize());
      case Query::kSerializedDeviceAssignment: return reply_string(e.SerializedDeviceAssignment());
      case Query::kOptimizedProgram: {
        auto program = e.OptimizedProgram();
        if (!program.ok()) return WriteStatus(out, program.status());
        WriteStatus(out, Status::Ok());
        out.str(program->format).str(program->code);
        return;
      }
      case Query::kSizeOfGeneratedCode: {
        auto size = e.SizeOfGeneratedCodeInBytes();
        if (!size.ok()) return WriteStatus(out, size.status());
        WriteStatus(out, Status::Ok());
        out.i64(*size);
        return;
      }
      case Query::kMemoryStats: {
        auto stats = e.MemoryStats();
        if (!stats.ok()) return WriteStatus(out, stats.status());
        WriteStatus(out, Status::Ok());
        out.i64(stats->generated_code_size_in_bytes).i64(stats->argument_size_in_bytes)
            .i64(stats->output_size_in_bytes).i64(stats->alias_size_in_bytes).i64(stats->temp_size_in_bytes)
            .i64(stats->peak_memory_in_bytes);
        return;
      }
      case Query::kCostAnalysis: {
        auto attributes = e.CostAnalysis();
        if (!attributes.ok()) return WriteStatus(out, attributes.status());
        WriteStatus(out, Status::Ok());
        WriteAttributes(out, *attributes);
        return;
      }
    }
    WriteStatus(out, InvalidArgument("unknown executable query"));
  }

  void Execute(Session& s, Reader& r, Writer& out) {
    auto executable = FindExecutable(s, r.i64());
    ExecuteOptions options;
    options.launch_id = static_cast<int>(r.i64());
    options.non_donatable_input_indices = r.ints();
    double timeout = r.f64();
    std::vector<int> cores = r.ints<int>();
    std::vector<std::vector<std::shared_ptr<Buffer>>> args;
    for (size_t d = 0; d < cores.size(); ++d) {
      std::vector<std::shared_ptr<Buffer>> list;
      for (int64_t id : r.ints()) {
        auto buffer = FindBuffer(s, id);
        if (buffer == nullptr) return WriteStatus(out, InvalidArgument("unknown argument buffer " + std::to_string(id)));
        list.push_back(std::move(buffer));
      }
      args.push_back(std::move(list));
    }
    if (!r.ok() || executable == nullptr) return WriteStatus(out, InvalidArgument("malformed execute request"));
    std::map<int, std::vector<std::unique_ptr<Buffer>>> outputs;
    if (std::getenv("PJRT_NEURON_DAEMON_TRACE") != nullptr) {
      std::fprintf(stderr, "execute %s cores=%s program cores=%s collectives=%d replicas=%d program=%s gang=%s\n",
                   executable->executable->name().c_str(), CoreList(cores).c_str(), CoreList(executable->cores).c_str(),
                   int(executable->has_collectives), executable->executable->num_replicas(),
                   Sha256::Hex(executable->program_key).substr(0, 12).c_str(),
                   Sha256::Hex(executable->gang_key).substr(0, 12).c_str());
    }
    Status status = cores == executable->cores || !executable->has_collectives
                        ? RunDirectly(*executable, cores, args, options, &outputs)
                        : RunAsGang(s, executable, cores, args, options, timeout, &outputs);
    if (!status.ok()) return WriteStatus(out, status);
    WriteStatus(out, Status::Ok());
    for (size_t d = 0; d < cores.size(); ++d) {
      auto& list = outputs[cores[d]];
      out.i64(static_cast<int64_t>(list.size()));
      for (auto& buffer : list) {
        Buffer& b = *buffer;
        int64_t id;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          id = Keep(s, std::move(buffer));
        }
        WriteBufferInfo(out, id, b);
      }
      std::vector<int64_t> donated;
      for (size_t i = 0; i < args[d].size(); ++i) {
        if (args[d][i]->IsDeleted()) donated.push_back(static_cast<int64_t>(i));
      }
      out.ints(donated);
    }
  }

  static Status AwaitAll(ExecuteResult& run) {
    for (auto& event : run.completions) {
      if (!event) continue;
      Status done = event->Await();
      if (!done.ok()) return done;
    }
    return Status::Ok();
  }

  Status RunDirectly(ServedExecutable& executable, const std::vector<int>& cores,
                     const std::vector<std::vector<std::shared_ptr<Buffer>>>& args, const ExecuteOptions& options,
                     std::map<int, std::vector<std::unique_ptr<Buffer>>>* outputs) {
    auto raw = [](const std::vector<std::shared_ptr<Buffer>>& list) {
      std::vector<Buffer*> out;
      for (auto& b : list) out.push_back(b.get());
      return out;
    };
    if (cores == executable.cores) {
      std::vector<std::vector<Buffer*>> all;
      for (auto& list : args) all.push_back(raw(list));
      PN_ASSIGN_OR_RETURN(ExecuteResult run, executable.executable->Execute(all, options, -1));
      PN_RETURN_IF_ERROR(AwaitAll(run));
      for (size_t d = 0; d < cores.size(); ++d) (*outputs)[cores[d]] = std::move(run.outputs[d]);
      return Status::Ok();
    }
    // No collectives: each core's replica runs on its own, whenever its process asks.
    for (size_t d = 0; d < cores.size(); ++d) {
      PN_ASSIGN_OR_RETURN(ExecuteResult run, executable.executable->Execute({raw(args[d])}, options, cores[d]));
      PN_RETURN_IF_ERROR(AwaitAll(run));
      (*outputs)[cores[d]] = std::move(run.outputs[0]);
    }
    return Status::Ok();
  }

  Status RunAsGang(Session& s, const std::shared_ptr<ServedExecutable>& executable, const std::vector<int>& cores,
                   const std::vector<std::vector<std::shared_ptr<Buffer>>>& args, const ExecuteOptions& options,
                   double timeout, std::map<int, std::vector<std::unique_ptr<Buffer>>>* outputs) {
    std::unique_lock<std::mutex> lock(mutex_);
    // Counted per job (world): a job that starts on a daemon an earlier job used begins at 0,
    // whatever collectives the earlier one left unmatched.
    const std::string job = "world " + std::to_string(s.world) + " ";
    const std::string sequence_key = job + executable->gang_key + "@" + std::to_string(cores.front());
    const int64_t sequence = sequence_numbers_[sequence_key]++;
    const std::string key = job + executable->gang_key + "#" + std::to_string(sequence);
    auto& slot = gangs_[key];
    if (!slot) {
      slot = std::make_shared<Gang>();
      slot->cores = executable->cores;
      slot->executable = executable;
      slot->options = options;
    }
    std::shared_ptr<Gang> gang = slot;
    if (!gang->done) {
      // A core whose process has already left can never join: fail now, not at the deadline.
      for (int core : gang->cores) {
        if (std::find(cores.begin(), cores.end(), core) != cores.end() || HeldInWorld(s.world, core)) continue;
        gang->done = true;
        gang->status = Status(ErrorCode::kAborted,
                              "collective program '" + executable->executable->name() + "' needs NeuronCore " +
                                  std::to_string(core) + ", but no live process of this job holds it (its process "
                                  "exited or never attached)");
        gangs_.erase(key);
        changed_.notify_all();
        break;
      }
    }
    for (size_t d = 0; d < cores.size(); ++d) {
      gang->args[cores[d]] = args[d];
      gang->executables[cores[d]] = executable;
    }
    if (!gang->done && gang->args.size() == gang->cores.size()) {
      gangs_.erase(key);
      bool one_program = true;
      for (auto& [core, member] : gang->executables) one_program = one_program && member->program_key == executable->program_key;
      ExecuteOptions options = gang->options;
      if (!one_program) options.launch_id = next_launch_id_++;  // the run id that makes their collectives meet
      lock.unlock();
      Status status = one_program ? RunGangTogether(*gang) : RunGangApart(*gang, options);
      lock.lock();
      gang->status = status;
      gang->done = true;
      changed_.notify_all();
    } else {
      auto deadline = Clock::now() + std::chrono::duration<double>(timeout);
      while (!gang->done) {
        if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !gang->done) {
          std::vector<int> missing;
          for (int core : gang->cores) {
            if (gang->args.count(core) == 0) missing.push_back(core);
          }
          gang->done = true;
          gang->status = Status(ErrorCode::kDeadlineExceeded,
                                "collective program '" + executable->executable->name() + "' (execution #" +
                                    std::to_string(sequence) + ") waited " + std::to_string(int(timeout)) +
                                    " s for NeuronCore(s) " + CoreList(missing) +
                                    " to join; their process(es) never ran it (PJRT_NEURON_COLLECTIVE_TIMEOUT)");
          gangs_.erase(key);
          changed_.notify_all();
        }
      }
    }
    if (!gang->status.ok()) return gang->status;
    for (int core : cores) (*outputs)[core] = std::move(gang->outputs[core]);
    return Status::Ok();
  }

  static std::vector<Buffer*> Raw(const std::vector<std::shared_ptr<Buffer>>& list) {
    std::vector<Buffer*> out;
    for (auto& b : list) out.push_back(b.get());
    return out;
  }

  // Every core runs the same program: one engine execution over all of them.
  Status RunGangTogether(Gang& gang) {
    std::vector<std::vector<Buffer*>> all;
    for (int core : gang.cores) all.push_back(Raw(gang.args[core]));
    auto run = gang.executable->executable->Execute(all, gang.options, -1);
    Status status = run.ok() ? AwaitAll(*run) : run.status();
    if (!status.ok()) return status;
    for (size_t d = 0; d < gang.cores.size(); ++d) gang.outputs[gang.cores[d]] = std::move(run->outputs[d]);
    return Status::Ok();
  }

  // The processes' programs differ but their collectives correspond: each core runs its own
  // process's program at the same time, under one run id, and XLA matches the collectives by
  // their channel ids.
  Status RunGangApart(Gang& gang, const ExecuteOptions& options) {
    for (auto& [core, member] : gang.executables) {
      if (member->cores != gang.cores) {
        return FailedPrecondition("the processes of this job ran different collective programs ('" +
                                  member->executable->name() + "' on NeuronCore " + std::to_string(core) +
                                  " spans cores " + CoreList(member->cores) + ", the others span " +
                                  CoreList(gang.cores) + ")");
      }
    }
    std::vector<StatusOr<ExecuteResult>> runs;
    for (size_t d = 0; d < gang.cores.size(); ++d) runs.emplace_back(Status(ErrorCode::kInternal, "not run"));
    std::vector<std::thread> threads;
    for (size_t d = 0; d < gang.cores.size(); ++d) {
      threads.emplace_back([&, d] {
        int core = gang.cores[d];
        runs[d] = gang.executables[core]->executable->Execute({Raw(gang.args[core])}, options, core);
        if (runs[d].ok()) {
          Status done = AwaitAll(*runs[d]);
          if (!done.ok()) runs[d] = done;
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& run : runs) {
      if (!run.ok()) return run.status();
    }
    for (size_t d = 0; d < gang.cores.size(); ++d) gang.outputs[gang.cores[d]] = std::move(runs[d]->outputs[0]);
    return Status::Ok();
  }

  bool HeldInWorld(int world_id, int core) {
    auto world = worlds_.find(world_id);
    if (world == worlds_.end()) return false;
    for (auto& [index, member] : world->second->members) {
      if (member->alive && std::find(member->cores.begin(), member->cores.end(), core) != member->cores.end()) {
        return true;
      }
    }
    return false;
  }

  std::unique_ptr<Engine> engine_;
  int listen_fd_;
  double idle_seconds_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int connections_ = 0;
  int next_session_ = 1;
  int next_world_ = 1;
  std::map<int, std::unique_ptr<Session>> sessions_;
  std::map<int, std::unique_ptr<World>> worlds_;
  std::map<std::string, std::shared_ptr<Gang>> gangs_;
  std::map<std::string, int64_t> sequence_numbers_;
  int next_launch_id_ = 1 << 30;  // apart from the launch ids frameworks choose
};

}  // namespace

int ServeInstance(const DaemonOptions& options) {
  signal(SIGPIPE, SIG_IGN);
  EngineOptions engine_options;
  engine_options.num_cores = options.num_cores;
  engine_options.library_path = options.engine_library_path;
  auto engine = CreateSimEngine(engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "pjrt-neuron instance daemon: %s\n", engine.status().message().c_str());
    return 1;
  }
  int fd = ListenOn(options.address);
  if (fd < 0) {
    std::fprintf(stderr, "pjrt-neuron instance daemon: another daemon already serves this instance\n");
    return 0;
  }
  std::fprintf(stderr, "pjrt-neuron instance daemon: serving %d NeuronCores (pid %d)\n", options.num_cores, getpid());
  Server server(std::move(engine.value()), fd, options.idle_seconds);
  return server.Run();
}

}  // namespace pjrt_neuron::daemon
