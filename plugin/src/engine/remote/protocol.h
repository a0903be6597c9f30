// The messages between a framework process (this folder's engine) and the instance daemon
// (daemon/): each message one type whose fields are listed once, in its Write and Read, so the
// two ends cannot drift apart. A request is its Op then its fields; a reply is a status, then,
// on success, its fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/engine.h"
#include "engine/remote/wire.h"
#include "pjrt_c_api.h"

namespace pjrt_neuron::engine::remote {

enum class Op : uint8_t {
  kHello = 1,
  kBufferFromHost,
  kCreateUninitialized,
  kToHost,
  kCopyRawToHost,
  kCopyTo,
  kReleaseBuffer,
  kDeleteBuffer,
  kCompile,
  kDeserialize,
  kExecutableQuery,
  kExecute,
  kReleaseExecutable,
  kDeleteExecutable,
  kDefaultDeviceAssignment,
  kAttach,  // a further connection of a process that said hello on its first one
};

// Releases are not answered: nothing can fail that the caller could act on, and a step of a
// training loop frees dozens of buffers.
inline bool IsOneWay(Op op) { return op == Op::kReleaseBuffer || op == Op::kReleaseExecutable; }

enum class Query : uint8_t {
  kFingerprint = 1,
  kCostAnalysis,
  kSizeOfGeneratedCode,
  kMemoryStats,
  kSerialize,
  kOptimizedProgram,
  kSerializedDeviceAssignment,
};

// Where a transfer's bytes are: inline in the message, or in the connection's SharedWindow.
enum class Placement : uint8_t { kInline = 0, kWindow = 1 };

// A PJRT memory layout as owned data, so it can cross the socket.
struct LayoutData {
  PJRT_Buffer_MemoryLayout_Type type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  std::vector<int64_t> minor_to_major;
  std::vector<int64_t> tile_dims;
  std::vector<size_t> tile_dim_sizes;
  std::vector<int64_t> byte_strides;

  static LayoutData From(const PJRT_Buffer_MemoryLayout& layout);
  // Points `layout` into this object, which must outlive it.
  void Fill(PJRT_Buffer_MemoryLayout* layout) const;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Bulk bytes: inline (`data` is the sender's bytes, or a view into the received message), or
// only their size when they travel in the window.
struct PlacedBytes {
  Placement placement = Placement::kInline;
  std::string_view data;  // inline only
  int64_t window_bytes = 0;  // window only
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct BufferInfo {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  int64_t id = 0;
  int core = 0;
  std::string memory_kind;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  int64_t size = 0;  // on the device, in bytes
  std::optional<LayoutData> layout;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct ExecutableInfo {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  int64_t id = 0;
  std::string name;
  int replicas = 1;
  int partitions = 1;
  std::vector<int> cores;  // every core of the program, in device-assignment order
  std::vector<OutputShape> outputs;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// A reply with nothing after its status.
struct EmptyReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  void Write(Writer&) const {}
  void Read(Reader&) {}
};

// The first message of a process's first connection.
struct HelloRequest {
  static constexpr Op kOp = Op::kHello;
  static constexpr const char* kMalformed = "malformed hello";
  int pid = 0;
  int process_index = 0;
  int world_size = 1;
  std::vector<int> cores;  // this process's
  double timeout_seconds = 300;  // for the whole world to attach
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct HelloReply {
  static constexpr const char* kMalformed = "malformed hello reply from the instance daemon";
  std::string description;  // the engine's
  int num_cores = 0;
  int64_t session = 0;
  std::vector<JobMember> world;  // by process index
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// The first message of a further connection of the same process; answered with EmptyReply.
struct AttachRequest {
  static constexpr Op kOp = Op::kAttach;
  static constexpr const char* kMalformed = "malformed attach";
  int64_t session = 0;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Answered with BufferInfo.
struct BufferFromHostRequest {
  static constexpr Op kOp = Op::kBufferFromHost;
  static constexpr const char* kMalformed = "malformed transfer";
  int core = 0;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  std::vector<int64_t> byte_strides;  // empty: dense
  std::string memory_kind;
  PlacedBytes bytes;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Answered with BufferInfo.
struct CreateUninitializedRequest {
  static constexpr Op kOp = Op::kCreateUninitialized;
  static constexpr const char* kMalformed = "malformed buffer request";
  int core = 0;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct ToHostRequest {
  static constexpr Op kOp = Op::kToHost;
  static constexpr const char* kMalformed = "unknown buffer";
  int64_t buffer = 0;
  bool query_only = false;  // only the size the host copy needs
  int64_t dst_size = 0;
  Placement placement = Placement::kInline;  // of the reply's bytes
  std::optional<LayoutData> host_layout;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct ToHostReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  int64_t required_size = 0;
  PlacedBytes bytes;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct CopyRawToHostRequest {
  static constexpr Op kOp = Op::kCopyRawToHost;
  static constexpr const char* kMalformed = "unknown buffer";
  int64_t buffer = 0;
  int64_t offset = 0;
  int64_t size = 0;
  Placement placement = Placement::kInline;  // of the reply's bytes
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct CopyRawToHostReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  PlacedBytes bytes;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Answered with BufferInfo.
struct CopyToRequest {
  static constexpr Op kOp = Op::kCopyTo;
  static constexpr const char* kMalformed = "unknown buffer";
  int64_t buffer = 0;
  int core = 0;
  std::string memory_kind;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Names one buffer or executable of the session. Releases are one-way; deletes are answered
// with EmptyReply.
template <Op op>
struct ObjectRequest {
  static constexpr Op kOp = op;
  static constexpr const char* kMalformed = "malformed release or delete request";
  int64_t id = 0;
  void Write(Writer& w) const { w.i64(id); }
  void Read(Reader& r) { id = r.i64(); }
};
using ReleaseBufferRequest = ObjectRequest<Op::kReleaseBuffer>;
using DeleteBufferRequest = ObjectRequest<Op::kDeleteBuffer>;
using ReleaseExecutableRequest = ObjectRequest<Op::kReleaseExecutable>;
using DeleteExecutableRequest = ObjectRequest<Op::kDeleteExecutable>;

// Answered with ExecutableInfo.
struct CompileRequest {
  static constexpr Op kOp = Op::kCompile;
  static constexpr const char* kMalformed = "malformed compile request";
  std::string format;
  std::string_view code;  // the caller's bytes, or a view into the received message
  std::string options;    // a serialized CompileOptionsProto
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Answered with ExecutableInfo.
struct DeserializeRequest {
  static constexpr Op kOp = Op::kDeserialize;
  static constexpr const char* kMalformed = "malformed deserialize request";
  std::string_view bytes;  // the caller's bytes, or a view into the received message
  std::optional<std::string> options;  // overrides the serialized compile options
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// Answered with the reply type of `what`, below.
struct ExecutableQueryRequest {
  static constexpr Op kOp = Op::kExecutableQuery;
  static constexpr const char* kMalformed = "unknown executable";
  int64_t executable = 0;
  Query what = Query::kFingerprint;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// kFingerprint, kSerialize, kSerializedDeviceAssignment.
struct QueryBytesReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  std::string value;
  void Write(Writer& w) const { w.str(value); }
  void Read(Reader& r) { value = r.str(); }
};

// kSizeOfGeneratedCode.
struct CodeSizeReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  int64_t bytes = 0;
  void Write(Writer& w) const { w.i64(bytes); }
  void Read(Reader& r) { bytes = r.i64(); }
};

// kMemoryStats.
struct MemoryStatsReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  CompiledMemoryStats stats;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// kCostAnalysis.
struct CostAnalysisReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  Attributes attributes;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

// kOptimizedProgram.
struct OptimizedProgramReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  ProgramText program;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct ExecuteRequest {
  static constexpr Op kOp = Op::kExecute;
  static constexpr const char* kMalformed = "malformed execute request";
  int64_t executable = 0;
  int launch_id = 0;
  std::vector<int64_t> non_donatable_input_indices;
  double timeout_seconds = 300;  // for the other processes' cores of a collective program
  std::vector<int> cores;        // this request's
  std::vector<std::vector<int64_t>> args;  // [core of `cores`][argument]: buffer ids
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct ExecuteReply {
  static constexpr const char* kMalformed = "malformed execution reply from the instance daemon";
  struct CoreResult {
    std::vector<BufferInfo> outputs;
    std::vector<int64_t> donated;  // indices of the arguments the execution consumed
  };
  std::vector<CoreResult> cores;  // in the request's order
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct DefaultDeviceAssignmentRequest {
  static constexpr Op kOp = Op::kDefaultDeviceAssignment;
  static constexpr const char* kMalformed = "malformed device assignment request";
  int replicas = 1;
  int partitions = 1;
  void Write(Writer& w) const;
  void Read(Reader& r);
};

struct DefaultDeviceAssignmentReply {
  static constexpr const char* kMalformed = "malformed reply from the instance daemon";
  std::vector<int> cores;  // replica-major
  void Write(Writer& w) const { w.ints(cores); }
  void Read(Reader& r) { cores = r.ints<int>(); }
};

// The request's Op; 0 for an empty message.
Op RequestOp(const std::string& payload);

template <typename Request>
std::string EncodeRequest(const Request& request) {
  Writer w;
  w.u8(static_cast<uint8_t>(Request::kOp));
  request.Write(w);
  return std::move(w.buffer());
}

// INVALID_ARGUMENT with the request's own message when the bytes are not exactly one Request.
// Views in `request` point into `payload`.
template <typename Request>
Status DecodeRequest(const std::string& payload, Request* request) {
  Reader r(payload);
  if (static_cast<Op>(r.u8()) != Request::kOp) return InvalidArgument(Request::kMalformed);
  request->Read(r);
  return r.complete() ? Status::Ok() : InvalidArgument(Request::kMalformed);
}

void WriteStatus(Writer& w, const Status& status);
Status ReadStatus(Reader& r);  // the reply's status; INTERNAL when it is malformed

// A failed reply, or a successful one with no fields.
std::string EncodeReply(const Status& status);

template <typename Reply>
std::string EncodeReply(const Reply& reply) {
  Writer w;
  WriteStatus(w, Status::Ok());
  reply.Write(w);
  return std::move(w.buffer());
}

// The reply's status when it failed, its fields when it succeeded, INTERNAL when it is neither.
// Views in the result point into `payload`.
template <typename Reply>
StatusOr<Reply> DecodeReply(const std::string& payload) {
  Reader r(payload);
  PN_RETURN_IF_ERROR(ReadStatus(r));
  Reply reply;
  reply.Read(r);
  if (!r.complete()) return Internal(Reply::kMalformed);
  return reply;
}

}  // namespace pjrt_neuron::engine::remote
