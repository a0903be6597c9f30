// One request of a session: decode, call the engine, keep its objects, encode the reply.
#include "daemon/dispatch.h"

#include <map>
#include <memory>
#include <vector>

#include "engine/remote/protocol.h"

namespace pjrt_neuron::daemon {
namespace {

using namespace engine;
using namespace engine::remote;

Status NoWindow(int64_t bytes) {
  return Status(ErrorCode::kResourceExhausted, "the instance daemon has no shared memory for a transfer of " +
                                                   std::to_string(bytes) +
                                                   " bytes: mapping the process's window failed (out of memory?)");
}

// Described before it is kept: a session that has ended drops what it is given.
BufferInfo InfoOf(Buffer& b) {
  BufferInfo info;
  info.core = b.core();
  info.memory_kind = b.memory_kind();
  info.type = b.element_type();
  info.dims = b.dims();
  auto size = b.OnDeviceSizeInBytes();
  info.size = size.ok() ? static_cast<int64_t>(*size) : 0;
  PJRT_Buffer_MemoryLayout layout;
  if (b.GetMemoryLayout(&layout).ok()) info.layout = LayoutData::From(layout);
  return info;
}

// Keeps a buffer the engine made and describes it to the process.
std::string ReplyBuffer(Session& s, std::unique_ptr<Buffer> buffer) {
  BufferInfo info = InfoOf(*buffer);
  info.id = s.objects.KeepBuffer(std::move(buffer));
  return EncodeReply(info);
}

std::string ReplyExecutable(Session& s, StatusOr<std::unique_ptr<Executable>> compiled) {
  if (!compiled.ok()) return EncodeReply(compiled.status());
  std::shared_ptr<ServedExecutable> served = ServeExecutable(std::move(compiled.value()));
  Executable& e = *served->executable;
  ExecutableInfo info;
  info.id = s.objects.KeepExecutable(served);
  info.name = e.name();
  info.replicas = e.num_replicas();
  info.partitions = e.num_partitions();
  info.cores = served->cores;
  info.outputs = e.outputs();
  return EncodeReply(info);
}

// Waits for a possibly absent event.
Status Await(const EventRef& event) { return event ? event->Await() : Status::Ok(); }

template <typename Reply, typename Value, typename Fill>
std::string ReplyWith(StatusOr<Value> value, Fill fill) {
  if (!value.ok()) return EncodeReply(value.status());
  Reply reply;
  fill(reply, *value);
  return EncodeReply(reply);
}

std::string Query(Session& s, const ExecutableQueryRequest& request) {
  auto executable = s.objects.FindExecutable(request.executable);
  if (executable == nullptr) return EncodeReply(InvalidArgument(ExecutableQueryRequest::kMalformed));
  Executable& e = *executable->executable;
  auto bytes = [](StatusOr<std::string> value) {
    return ReplyWith<QueryBytesReply>(std::move(value), [](QueryBytesReply& r, std::string& v) { r.value = std::move(v); });
  };
  switch (request.what) {
    case Query::kFingerprint: return bytes(e.Fingerprint());
    case Query::kSerialize: return bytes(e.Serialize());
    case Query::kSerializedDeviceAssignment: return bytes(e.SerializedDeviceAssignment());
    case Query::kOptimizedProgram:
      return ReplyWith<OptimizedProgramReply>(e.OptimizedProgram(),
                                              [](OptimizedProgramReply& r, ProgramText& v) { r.program = std::move(v); });
    case Query::kSizeOfGeneratedCode:
      return ReplyWith<CodeSizeReply>(e.SizeOfGeneratedCodeInBytes(), [](CodeSizeReply& r, int64_t v) { r.bytes = v; });
    case Query::kMemoryStats:
      return ReplyWith<MemoryStatsReply>(e.MemoryStats(), [](MemoryStatsReply& r, CompiledMemoryStats& v) { r.stats = v; });
    case Query::kCostAnalysis:
      return ReplyWith<CostAnalysisReply>(e.CostAnalysis(),
                                          [](CostAnalysisReply& r, Attributes& v) { r.attributes = std::move(v); });
  }
  return EncodeReply(InvalidArgument("unknown executable query"));
}

std::string BufferFromHost(Engine& engine, Session& s, const BufferFromHostRequest& request,
                           const SharedWindow& window) {
  HostBufferSpec spec;
  spec.type = request.type;
  spec.dims = request.dims;
  spec.memory_kind = request.memory_kind;
  if (request.bytes.placement == Placement::kInline) {
    spec.data = request.bytes.data.data();
  } else {
    if (!window.Holds(static_cast<size_t>(request.bytes.window_bytes))) {
      return EncodeReply(NoWindow(request.bytes.window_bytes));
    }
    spec.data = window.data();
  }
  if (!request.byte_strides.empty()) {
    spec.byte_strides = request.byte_strides.data();
    spec.num_byte_strides = request.byte_strides.size();
  }
  spec.semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  auto transfer = engine.BufferFromHost(request.core, spec);
  if (!transfer.ok()) return EncodeReply(transfer.status());
  if (transfer->done_with_host_buffer) transfer->done_with_host_buffer->Await();
  return ReplyBuffer(s, std::move(transfer->buffer));
}

std::string ToHost(Session& s, const ToHostRequest& request, const SharedWindow& window) {
  auto buffer = s.objects.FindBuffer(request.buffer);
  if (buffer == nullptr || request.dst_size < 0) return EncodeReply(InvalidArgument("unknown buffer"));
  const bool to_window = request.placement == Placement::kWindow;
  if (to_window && !window.Holds(static_cast<size_t>(request.dst_size))) return EncodeReply(NoWindow(request.dst_size));
  PJRT_Buffer_MemoryLayout layout;
  if (request.host_layout) request.host_layout->Fill(&layout);
  std::string data(request.query_only || to_window ? 0 : request.dst_size, '\0');
  char* dst = request.query_only ? nullptr : to_window ? window.data() : data.data();
  size_t required = 0;
  const PJRT_Buffer_MemoryLayout* host_layout = request.host_layout ? &layout : nullptr;
  // A copy is checked here, in the same request, rather than after a size query of its own.
  auto event = request.query_only ? buffer->ToHost(nullptr, 0, host_layout, &required)
                                  : buffer->CheckedToHost(dst, request.dst_size, host_layout);
  if (!event.ok()) return EncodeReply(event.status());
  if (Status done = Await(*event); !done.ok()) return EncodeReply(done);
  ToHostReply reply;
  reply.required_size = static_cast<int64_t>(required);
  reply.bytes.placement = request.placement;
  reply.bytes.data = data;
  reply.bytes.window_bytes = request.dst_size;
  return EncodeReply(reply);
}

std::string CopyRawToHost(Session& s, const CopyRawToHostRequest& request, const SharedWindow& window) {
  auto buffer = s.objects.FindBuffer(request.buffer);
  if (buffer == nullptr || request.size < 0) return EncodeReply(InvalidArgument("unknown buffer"));
  const bool to_window = request.placement == Placement::kWindow;
  if (to_window && !window.Holds(static_cast<size_t>(request.size))) return EncodeReply(NoWindow(request.size));
  std::string data(to_window ? 0 : request.size, '\0');
  auto event = buffer->CopyRawToHost(to_window ? window.data() : data.data(), request.offset, request.size);
  if (!event.ok()) return EncodeReply(event.status());
  if (Status done = Await(*event); !done.ok()) return EncodeReply(done);
  CopyRawToHostReply reply;
  reply.bytes.placement = request.placement;
  reply.bytes.data = data;
  reply.bytes.window_bytes = request.size;
  return EncodeReply(reply);
}

std::string CopyTo(Session& s, const CopyToRequest& request) {
  auto buffer = s.objects.FindBuffer(request.buffer);
  if (buffer == nullptr) return EncodeReply(InvalidArgument("unknown buffer"));
  auto copy = buffer->CopyTo(request.core, request.memory_kind);
  if (!copy.ok()) return EncodeReply(copy.status());
  if (auto ready = (*copy)->ReadyEvent(); ready.ok() && *ready) (*ready)->Await();
  return ReplyBuffer(s, std::move(copy.value()));
}

// Decodes the request as `Request` and answers it with `answer`, or with the request's own
// message when the bytes are not one.
template <typename Request, typename Respond>
std::string Answer(const std::string& payload, Respond respond) {
  Request request;
  Status decoded = DecodeRequest(payload, &request);
  if (!decoded.ok()) return EncodeReply(decoded);
  return respond(request);
}

}  // namespace

std::string Dispatcher::Handle(Session& s, const std::string& payload, const SharedWindow& window) {
  switch (RequestOp(payload)) {
    case Op::kBufferFromHost:
      return Answer<BufferFromHostRequest>(payload, [&](const BufferFromHostRequest& r) {
        return BufferFromHost(engine_, s, r, window);
      });
    case Op::kCreateUninitialized:
      return Answer<CreateUninitializedRequest>(payload, [&](const CreateUninitializedRequest& r) {
        auto buffer = engine_.CreateUninitializedBuffer(r.core, r.type, r.dims);
        return buffer.ok() ? ReplyBuffer(s, std::move(buffer.value())) : EncodeReply(buffer.status());
      });
    case Op::kToHost:
      return Answer<ToHostRequest>(payload, [&](const ToHostRequest& r) { return ToHost(s, r, window); });
    case Op::kCopyRawToHost:
      return Answer<CopyRawToHostRequest>(payload, [&](const CopyRawToHostRequest& r) {
        return CopyRawToHost(s, r, window);
      });
    case Op::kCopyTo: return Answer<CopyToRequest>(payload, [&](const CopyToRequest& r) { return CopyTo(s, r); });
    case Op::kReleaseBuffer:
      return Answer<ReleaseBufferRequest>(payload, [&](const ReleaseBufferRequest& r) {
        s.objects.ReleaseBuffer(r.id);
        return EncodeReply(Status::Ok());
      });
    case Op::kDeleteBuffer:
      return Answer<DeleteBufferRequest>(payload, [&](const DeleteBufferRequest& r) {
        if (auto buffer = s.objects.FindBuffer(r.id)) buffer->Delete();
        return EncodeReply(Status::Ok());
      });
    case Op::kCompile:
      return Answer<CompileRequest>(payload, [&](const CompileRequest& r) {
        Program program;
        program.format = r.format;
        program.code = r.code.data();
        program.code_size = r.code.size();
        return ReplyExecutable(s, engine_.Compile(program, r.options));
      });
    case Op::kDeserialize:
      return Answer<DeserializeRequest>(payload, [&](const DeserializeRequest& r) {
        return ReplyExecutable(s, engine_.Deserialize(std::string(r.bytes), r.options ? &*r.options : nullptr));
      });
    case Op::kExecutableQuery:
      return Answer<ExecutableQueryRequest>(payload, [&](const ExecutableQueryRequest& r) { return Query(s, r); });
    case Op::kExecute:
      return Answer<ExecuteRequest>(payload, [&](const ExecuteRequest& r) { return Execute(s, r); });
    case Op::kReleaseExecutable:
      return Answer<ReleaseExecutableRequest>(payload, [&](const ReleaseExecutableRequest& r) {
        s.objects.ReleaseExecutable(r.id);
        return EncodeReply(Status::Ok());
      });
    case Op::kDeleteExecutable:
      return Answer<DeleteExecutableRequest>(payload, [&](const DeleteExecutableRequest& r) {
        if (auto executable = s.objects.FindExecutable(r.id)) executable->executable->Delete();
        return EncodeReply(Status::Ok());
      });
    case Op::kDefaultDeviceAssignment:
      return Answer<DefaultDeviceAssignmentRequest>(payload, [&](const DefaultDeviceAssignmentRequest& r) {
        return ReplyWith<DefaultDeviceAssignmentReply>(
            engine_.DefaultDeviceAssignment(r.replicas, r.partitions),
            [](DefaultDeviceAssignmentReply& reply, std::vector<int>& cores) { reply.cores = std::move(cores); });
      });
    default: break;
  }
  return EncodeReply(InvalidArgument("unknown request " + std::to_string(int(RequestOp(payload)))));
}

std::string Dispatcher::Execute(Session& s, const ExecuteRequest& request) {
  std::vector<std::vector<std::shared_ptr<Buffer>>> args;
  for (const auto& ids : request.args) {
    std::vector<std::shared_ptr<Buffer>> list;
    for (int64_t id : ids) {
      auto buffer = s.objects.FindBuffer(id);
      if (buffer == nullptr) return EncodeReply(InvalidArgument("unknown argument buffer " + std::to_string(id)));
      list.push_back(std::move(buffer));
    }
    args.push_back(std::move(list));
  }
  auto executable = s.objects.FindExecutable(request.executable);
  if (executable == nullptr) return EncodeReply(InvalidArgument(ExecuteRequest::kMalformed));
  ExecuteOptions options;
  options.launch_id = request.launch_id;
  options.non_donatable_input_indices = {request.non_donatable_input_indices.data(),
                                         request.non_donatable_input_indices.size()};
  CoreOutputs outputs;
  Status status = executions_.Run(s.world, executable, request.cores, args, options, request.timeout_seconds, &outputs);
  if (!status.ok()) return EncodeReply(status);
  ExecuteReply reply;
  for (size_t d = 0; d < request.cores.size(); ++d) {
    ExecuteReply::CoreResult& result = reply.cores.emplace_back();
    for (auto& buffer : outputs[request.cores[d]]) {
      BufferInfo& info = result.outputs.emplace_back(InfoOf(*buffer));
      info.id = s.objects.KeepBuffer(std::move(buffer));
    }
    for (size_t i = 0; i < args[d].size(); ++i) {
      if (args[d][i]->IsDeleted()) result.donated.push_back(static_cast<int64_t>(i));
    }
  }
  return EncodeReply(reply);
}

}  // namespace pjrt_neuron::daemon
