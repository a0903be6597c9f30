// The messages between a framework process and the instance daemon: every type survives a round
// trip field for field, and truncated or malformed bytes fail with a status, never a misread.
#include "engine/remote/protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

namespace pjrt_neuron::engine::remote {
namespace {

template <typename Request>
Request RoundTripRequest(const Request& sent) {
  const std::string bytes = EncodeRequest(sent);
  EXPECT_EQ(RequestOp(bytes), Request::kOp);
  Request received;
  Status status = DecodeRequest(bytes, &received);
  EXPECT_TRUE(status.ok()) << status.message();
  return received;
}

// Replies may hold views into their bytes, so the caller keeps them.
template <typename Reply>
Reply RoundTripReply(const Reply& sent, std::string* bytes) {
  *bytes = EncodeReply(sent);
  StatusOr<Reply> received = DecodeReply<Reply>(*bytes);
  EXPECT_TRUE(received.ok()) << received.status().message();
  return received.ok() ? std::move(received.value()) : Reply{};
}

// Every shorter prefix, and the message with a byte more, is refused with the request's message.
template <typename Request>
void ExpectOnlyTheWholeRequestDecodes(const Request& sent) {
  const std::string bytes = EncodeRequest(sent);
  for (size_t size = 0; size < bytes.size(); ++size) {
    Request received;
    Status status = DecodeRequest(bytes.substr(0, size), &received);
    ASSERT_EQ(status.code(), ErrorCode::kInvalidArgument) << "a prefix of " << size << " of " << bytes.size() << " bytes";
    EXPECT_EQ(status.message(), Request::kMalformed);
  }
  Request received;
  EXPECT_EQ(DecodeRequest(bytes + '\0', &received).code(), ErrorCode::kInvalidArgument);
}

template <typename Reply>
void ExpectOnlyTheWholeReplyDecodes(const Reply& sent) {
  const std::string bytes = EncodeReply(sent);
  for (size_t size = 0; size < bytes.size(); ++size) {
    const std::string prefix = bytes.substr(0, size);
    StatusOr<Reply> received = DecodeReply<Reply>(prefix);
    ASSERT_EQ(received.status().code(), ErrorCode::kInternal) << "a prefix of " << size << " of " << bytes.size() << " bytes";
  }
  const std::string longer = bytes + '\0';
  EXPECT_EQ(DecodeReply<Reply>(longer).status().code(), ErrorCode::kInternal);
}

LayoutData TiledLayout() {
  LayoutData layout;
  layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout.minor_to_major = {1, 0};
  layout.tile_dims = {8, 128, 2};
  layout.tile_dim_sizes = {2, 1};
  return layout;
}

void ExpectSameLayout(const LayoutData& a, const LayoutData& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.minor_to_major, b.minor_to_major);
  EXPECT_EQ(a.tile_dims, b.tile_dims);
  EXPECT_EQ(a.tile_dim_sizes, b.tile_dim_sizes);
  EXPECT_EQ(a.byte_strides, b.byte_strides);
}

BufferInfo SomeBuffer(int64_t id) {
  BufferInfo info;
  info.id = id;
  info.core = 3;
  info.memory_kind = "pinned_host";
  info.type = PJRT_Buffer_Type_BF16;
  info.dims = {4, 0, 7};
  info.size = 56;
  info.layout = TiledLayout();
  return info;
}

void ExpectSameBuffer(const BufferInfo& a, const BufferInfo& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.core, b.core);
  EXPECT_EQ(a.memory_kind, b.memory_kind);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.dims, b.dims);
  EXPECT_EQ(a.size, b.size);
  ASSERT_EQ(a.layout.has_value(), b.layout.has_value());
  if (a.layout) ExpectSameLayout(*a.layout, *b.layout);
}

HelloRequest SomeHello() {
  HelloRequest hello;
  hello.pid = 4242;
  hello.process_index = 1;
  hello.world_size = 2;
  hello.cores = {2, 3};
  hello.timeout_seconds = 12.5;
  return hello;
}

ExecuteRequest SomeExecute() {
  ExecuteRequest execute;
  execute.executable = 9;
  execute.launch_id = -5;
  execute.non_donatable_input_indices = {0, 2};
  execute.timeout_seconds = 2.25;
  execute.cores = {4, 5};
  execute.args = {{11, 12, 13}, {}};
  return execute;
}

TEST(Protocol, HelloAndItsReplyRoundTrip) {
  HelloRequest hello = RoundTripRequest(SomeHello());
  EXPECT_EQ(hello.pid, 4242);
  EXPECT_EQ(hello.process_index, 1);
  EXPECT_EQ(hello.world_size, 2);
  EXPECT_EQ(hello.cores, (std::vector<int>{2, 3}));
  EXPECT_EQ(hello.timeout_seconds, 12.5);

  HelloReply sent;
  sent.description = "xla-cpu 0.0.1";
  sent.num_cores = 32;
  sent.session = 77;
  sent.world = {{0, 100, {0, 1}}, {1, 101, {2, 3}}};
  std::string bytes;
  HelloReply reply = RoundTripReply(sent, &bytes);
  EXPECT_EQ(reply.description, "xla-cpu 0.0.1");
  EXPECT_EQ(reply.num_cores, 32);
  EXPECT_EQ(reply.session, 77);
  ASSERT_EQ(reply.world.size(), 2u);
  EXPECT_EQ(reply.world[1].process_index, 1);
  EXPECT_EQ(reply.world[1].pid, 101);
  EXPECT_EQ(reply.world[1].cores, (std::vector<int>{2, 3}));
}

TEST(Protocol, AttachRoundTrips) {
  AttachRequest attach;
  attach.session = 123456789012;
  EXPECT_EQ(RoundTripRequest(attach).session, 123456789012);
  std::string bytes;
  RoundTripReply(EmptyReply{}, &bytes);
  EXPECT_EQ(bytes, EncodeReply(Status::Ok()));
}

TEST(Protocol, BufferInfoRoundTripsWithAndWithoutLayout) {
  std::string bytes;
  ExpectSameBuffer(RoundTripReply(SomeBuffer(5), &bytes), SomeBuffer(5));
  BufferInfo strided = SomeBuffer(6);
  strided.layout = LayoutData{};
  strided.layout->type = PJRT_Buffer_MemoryLayout_Type_Strides;
  strided.layout->byte_strides = {28, 4};
  ExpectSameBuffer(RoundTripReply(strided, &bytes), strided);
  BufferInfo plain = SomeBuffer(7);
  plain.layout.reset();
  ExpectSameBuffer(RoundTripReply(plain, &bytes), plain);
}

TEST(Protocol, ExecutableInfoRoundTrips) {
  ExecutableInfo sent;
  sent.id = 8;
  sent.name = "jit_step";
  sent.replicas = 2;
  sent.partitions = 4;
  sent.cores = {0, 1, 2, 3, 4, 5, 6, 7};
  sent.outputs = {{PJRT_Buffer_Type_F32, {2, 3}, "device"}, {PJRT_Buffer_Type_S8, {}, "pinned_host"}};
  std::string bytes;
  ExecutableInfo info = RoundTripReply(sent, &bytes);
  EXPECT_EQ(info.id, 8);
  EXPECT_EQ(info.name, "jit_step");
  EXPECT_EQ(info.replicas, 2);
  EXPECT_EQ(info.partitions, 4);
  EXPECT_EQ(info.cores, sent.cores);
  ASSERT_EQ(info.outputs.size(), 2u);
  EXPECT_EQ(info.outputs[0].type, PJRT_Buffer_Type_F32);
  EXPECT_EQ(info.outputs[0].dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(info.outputs[1].memory_kind, "pinned_host");
}

TEST(Protocol, BufferFromHostCarriesInlineBytesOrTheirWindowSize) {
  const std::string data("\x01\x00\x02\xff", 4);
  BufferFromHostRequest sent;
  sent.core = 1;
  sent.type = PJRT_Buffer_Type_U8;
  sent.dims = {2, 2};
  sent.byte_strides = {2, 1};
  sent.memory_kind = "device";
  sent.bytes.data = data;
  BufferFromHostRequest inline_request = RoundTripRequest(sent);
  EXPECT_EQ(inline_request.core, 1);
  EXPECT_EQ(inline_request.type, PJRT_Buffer_Type_U8);
  EXPECT_EQ(inline_request.dims, sent.dims);
  EXPECT_EQ(inline_request.byte_strides, sent.byte_strides);
  EXPECT_EQ(inline_request.memory_kind, "device");
  EXPECT_EQ(inline_request.bytes.placement, Placement::kInline);

  const std::string bytes = EncodeRequest(sent);
  BufferFromHostRequest viewed;
  ASSERT_TRUE(DecodeRequest(bytes, &viewed).ok());
  EXPECT_EQ(viewed.bytes.data, data);  // a view into the message, the embedded zero kept

  sent.bytes = PlacedBytes{Placement::kWindow, {}, int64_t{1} << 30};
  BufferFromHostRequest windowed = RoundTripRequest(sent);
  EXPECT_EQ(windowed.bytes.placement, Placement::kWindow);
  EXPECT_EQ(windowed.bytes.window_bytes, int64_t{1} << 30);
  EXPECT_TRUE(windowed.bytes.data.empty());
}

TEST(Protocol, CreateUninitializedAndCopyToRoundTrip) {
  CreateUninitializedRequest create;
  create.core = 2;
  create.type = PJRT_Buffer_Type_F16;
  create.dims = {1024};
  CreateUninitializedRequest created = RoundTripRequest(create);
  EXPECT_EQ(created.core, 2);
  EXPECT_EQ(created.type, PJRT_Buffer_Type_F16);
  EXPECT_EQ(created.dims, create.dims);

  CopyToRequest copy;
  copy.buffer = 40;
  copy.core = 1;
  copy.memory_kind = "pinned_host";
  CopyToRequest copied = RoundTripRequest(copy);
  EXPECT_EQ(copied.buffer, 40);
  EXPECT_EQ(copied.core, 1);
  EXPECT_EQ(copied.memory_kind, "pinned_host");
}

TEST(Protocol, ToHostAndItsReplyRoundTrip) {
  ToHostRequest sent;
  sent.buffer = 3;
  sent.query_only = true;
  sent.dst_size = 96;
  sent.placement = Placement::kWindow;
  sent.host_layout = TiledLayout();
  ToHostRequest request = RoundTripRequest(sent);
  EXPECT_EQ(request.buffer, 3);
  EXPECT_TRUE(request.query_only);
  EXPECT_EQ(request.dst_size, 96);
  EXPECT_EQ(request.placement, Placement::kWindow);
  ASSERT_TRUE(request.host_layout.has_value());
  ExpectSameLayout(*request.host_layout, TiledLayout());
  sent.host_layout.reset();
  EXPECT_FALSE(RoundTripRequest(sent).host_layout.has_value());

  ToHostReply reply;
  reply.required_size = 96;
  reply.bytes.data = "abc";
  std::string bytes;
  ToHostReply received = RoundTripReply(reply, &bytes);
  EXPECT_EQ(received.required_size, 96);
  EXPECT_EQ(received.bytes.data, "abc");
}

TEST(Protocol, CopyRawToHostAndItsReplyRoundTrip) {
  CopyRawToHostRequest sent;
  sent.buffer = 4;
  sent.offset = 16;
  sent.size = 1 << 20;
  sent.placement = Placement::kWindow;
  CopyRawToHostRequest request = RoundTripRequest(sent);
  EXPECT_EQ(request.buffer, 4);
  EXPECT_EQ(request.offset, 16);
  EXPECT_EQ(request.size, 1 << 20);
  EXPECT_EQ(request.placement, Placement::kWindow);

  CopyRawToHostReply reply;
  reply.bytes = PlacedBytes{Placement::kWindow, {}, 1 << 20};
  std::string bytes;
  CopyRawToHostReply received = RoundTripReply(reply, &bytes);
  EXPECT_EQ(received.bytes.placement, Placement::kWindow);
  EXPECT_EQ(received.bytes.window_bytes, 1 << 20);
}

TEST(Protocol, ReleasesAndDeletesNameTheirObjectUnderTheirOwnOp) {
  ReleaseBufferRequest release_buffer;
  release_buffer.id = 1;
  DeleteBufferRequest delete_buffer;
  delete_buffer.id = 2;
  ReleaseExecutableRequest release_executable;
  release_executable.id = 3;
  DeleteExecutableRequest delete_executable;
  delete_executable.id = 4;
  EXPECT_EQ(RoundTripRequest(release_buffer).id, 1);
  EXPECT_EQ(RoundTripRequest(delete_buffer).id, 2);
  EXPECT_EQ(RoundTripRequest(release_executable).id, 3);
  EXPECT_EQ(RoundTripRequest(delete_executable).id, 4);
  EXPECT_TRUE(IsOneWay(RequestOp(EncodeRequest(release_buffer))));
  EXPECT_TRUE(IsOneWay(RequestOp(EncodeRequest(release_executable))));
  EXPECT_FALSE(IsOneWay(RequestOp(EncodeRequest(delete_buffer))));
  EXPECT_FALSE(IsOneWay(RequestOp(EncodeRequest(delete_executable))));
  // A delete is not a release: the op decides which request the bytes are.
  ReleaseBufferRequest wrong;
  EXPECT_EQ(DecodeRequest(EncodeRequest(delete_buffer), &wrong).code(), ErrorCode::kInvalidArgument);
}

TEST(Protocol, CompileAndDeserializeRoundTrip) {
  const std::string code("HloModule\0main", 14);
  CompileRequest compile;
  compile.format = "hlo";
  compile.code = code;
  compile.options = std::string("\x08\x02", 2);
  const std::string compile_bytes = EncodeRequest(compile);
  CompileRequest compiled;
  ASSERT_TRUE(DecodeRequest(compile_bytes, &compiled).ok());
  EXPECT_EQ(compiled.format, "hlo");
  EXPECT_EQ(compiled.code, code);
  EXPECT_EQ(compiled.options, compile.options);

  const std::string serialized = "serialized executable";
  DeserializeRequest deserialize;
  deserialize.bytes = serialized;
  const std::string without_options = EncodeRequest(deserialize);
  DeserializeRequest received;
  ASSERT_TRUE(DecodeRequest(without_options, &received).ok());
  EXPECT_EQ(received.bytes, serialized);
  EXPECT_FALSE(received.options.has_value());
  deserialize.options = "";  // present but empty is not absent
  const std::string with_options = EncodeRequest(deserialize);
  ASSERT_TRUE(DecodeRequest(with_options, &received).ok());
  ASSERT_TRUE(received.options.has_value());
  EXPECT_EQ(*received.options, "");
}

TEST(Protocol, ExecutableQueriesAndEachReplyRoundTrip) {
  ExecutableQueryRequest query;
  query.executable = 12;
  query.what = Query::kCostAnalysis;
  ExecutableQueryRequest asked = RoundTripRequest(query);
  EXPECT_EQ(asked.executable, 12);
  EXPECT_EQ(asked.what, Query::kCostAnalysis);

  std::string bytes;
  QueryBytesReply fingerprint;
  fingerprint.value = std::string("\0fp", 3);
  EXPECT_EQ(RoundTripReply(fingerprint, &bytes).value, fingerprint.value);

  CodeSizeReply size;
  size.bytes = 1 << 20;
  EXPECT_EQ(RoundTripReply(size, &bytes).bytes, 1 << 20);

  MemoryStatsReply stats;
  stats.stats = {1, 2, 3, 4, 5, 6};
  MemoryStatsReply received_stats = RoundTripReply(stats, &bytes);
  EXPECT_EQ(received_stats.stats.generated_code_size_in_bytes, 1);
  EXPECT_EQ(received_stats.stats.argument_size_in_bytes, 2);
  EXPECT_EQ(received_stats.stats.output_size_in_bytes, 3);
  EXPECT_EQ(received_stats.stats.alias_size_in_bytes, 4);
  EXPECT_EQ(received_stats.stats.temp_size_in_bytes, 5);
  EXPECT_EQ(received_stats.stats.peak_memory_in_bytes, 6);

  CostAnalysisReply cost;
  cost.attributes = {{"name", std::string("main")}, {"flops", int64_t{96}}, {"dims", std::vector<int64_t>{1, 2}},
                     {"utilization", 0.5f}, {"estimated", true}};
  CostAnalysisReply received_cost = RoundTripReply(cost, &bytes);
  ASSERT_EQ(received_cost.attributes.size(), 5u);
  EXPECT_EQ(std::get<std::string>(received_cost.attributes[0].value), "main");
  EXPECT_EQ(std::get<int64_t>(received_cost.attributes[1].value), 96);
  EXPECT_EQ(std::get<std::vector<int64_t>>(received_cost.attributes[2].value), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(std::get<float>(received_cost.attributes[3].value), 0.5f);
  EXPECT_EQ(std::get<bool>(received_cost.attributes[4].value), true);
  EXPECT_EQ(received_cost.attributes[4].name, "estimated");

  OptimizedProgramReply program;
  program.program = {"hlo_with_config", std::string("\n\x04main", 6)};
  OptimizedProgramReply received_program = RoundTripReply(program, &bytes);
  EXPECT_EQ(received_program.program.format, "hlo_with_config");
  EXPECT_EQ(received_program.program.code, program.program.code);
}

TEST(Protocol, ExecuteAndItsReplyRoundTrip) {
  ExecuteRequest request = RoundTripRequest(SomeExecute());
  EXPECT_EQ(request.executable, 9);
  EXPECT_EQ(request.launch_id, -5);
  EXPECT_EQ(request.non_donatable_input_indices, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(request.timeout_seconds, 2.25);
  EXPECT_EQ(request.cores, (std::vector<int>{4, 5}));
  EXPECT_EQ(request.args, (std::vector<std::vector<int64_t>>{{11, 12, 13}, {}}));

  ExecuteReply sent;
  sent.cores.push_back({{SomeBuffer(20), SomeBuffer(21)}, {0, 2}});
  sent.cores.push_back({{}, {}});
  std::string bytes;
  ExecuteReply reply = RoundTripReply(sent, &bytes);
  ASSERT_EQ(reply.cores.size(), 2u);
  ASSERT_EQ(reply.cores[0].outputs.size(), 2u);
  ExpectSameBuffer(reply.cores[0].outputs[1], SomeBuffer(21));
  EXPECT_EQ(reply.cores[0].donated, (std::vector<int64_t>{0, 2}));
  EXPECT_TRUE(reply.cores[1].outputs.empty());
}

TEST(Protocol, DefaultDeviceAssignmentAndItsReplyRoundTrip) {
  DefaultDeviceAssignmentRequest sent;
  sent.replicas = 4;
  sent.partitions = 2;
  DefaultDeviceAssignmentRequest request = RoundTripRequest(sent);
  EXPECT_EQ(request.replicas, 4);
  EXPECT_EQ(request.partitions, 2);
  DefaultDeviceAssignmentReply reply;
  reply.cores = {0, 1, 2, 3, 4, 5, 6, 7};
  std::string bytes;
  EXPECT_EQ(RoundTripReply(reply, &bytes).cores, reply.cores);
}

TEST(Protocol, FailedRepliesCarryTheirStatusWhateverTheBodyType) {
  const std::string bytes = EncodeReply(Status(ErrorCode::kDeadlineExceeded, "waited 2 s for NeuronCore(s) 1"));
  StatusOr<ExecuteReply> reply = DecodeReply<ExecuteReply>(bytes);
  EXPECT_EQ(reply.status().code(), ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(reply.status().message(), "waited 2 s for NeuronCore(s) 1");
  // A success without the body it promised is malformed, in the body's own words.
  StatusOr<ExecuteReply> empty = DecodeReply<ExecuteReply>(EncodeReply(Status::Ok()));
  EXPECT_EQ(empty.status().code(), ErrorCode::kInternal);
  EXPECT_EQ(empty.status().message(), ExecuteReply::kMalformed);
}

TEST(Protocol, TruncatedRequestsFailCleanly) {
  ExpectOnlyTheWholeRequestDecodes(SomeHello());
  AttachRequest attach;
  attach.session = 3;
  ExpectOnlyTheWholeRequestDecodes(attach);
  BufferFromHostRequest transfer;
  transfer.dims = {3};
  transfer.bytes.data = "xyz";
  ExpectOnlyTheWholeRequestDecodes(transfer);
  ToHostRequest to_host;
  to_host.host_layout = TiledLayout();
  ExpectOnlyTheWholeRequestDecodes(to_host);
  ExpectOnlyTheWholeRequestDecodes(CopyRawToHostRequest{});
  ExpectOnlyTheWholeRequestDecodes(CreateUninitializedRequest{});
  ExpectOnlyTheWholeRequestDecodes(CopyToRequest{});
  ExpectOnlyTheWholeRequestDecodes(DeleteBufferRequest{});
  CompileRequest compile;
  compile.code = "HloModule m";
  ExpectOnlyTheWholeRequestDecodes(compile);
  DeserializeRequest deserialize;
  deserialize.options = "o";
  ExpectOnlyTheWholeRequestDecodes(deserialize);
  ExpectOnlyTheWholeRequestDecodes(ExecutableQueryRequest{});
  ExpectOnlyTheWholeRequestDecodes(SomeExecute());
  ExpectOnlyTheWholeRequestDecodes(DefaultDeviceAssignmentRequest{});
}

TEST(Protocol, TruncatedRepliesFailCleanly) {
  HelloReply hello;
  hello.world = {{0, 1, {0}}};
  ExpectOnlyTheWholeReplyDecodes(hello);
  ExpectOnlyTheWholeReplyDecodes(SomeBuffer(1));
  ExecutableInfo executable;
  executable.outputs = {{PJRT_Buffer_Type_F32, {2}, "device"}};
  ExpectOnlyTheWholeReplyDecodes(executable);
  ToHostReply to_host;
  to_host.bytes.data = "bytes";
  ExpectOnlyTheWholeReplyDecodes(to_host);
  ExpectOnlyTheWholeReplyDecodes(CopyRawToHostReply{});
  ExpectOnlyTheWholeReplyDecodes(MemoryStatsReply{});
  CostAnalysisReply cost;
  cost.attributes = {{"flops", int64_t{1}}};
  ExpectOnlyTheWholeReplyDecodes(cost);
  ExpectOnlyTheWholeReplyDecodes(OptimizedProgramReply{});
  ExecuteReply execute;
  execute.cores.push_back({{SomeBuffer(2)}, {0}});
  ExpectOnlyTheWholeReplyDecodes(execute);
  DefaultDeviceAssignmentReply assignment;
  assignment.cores = {0, 1};
  ExpectOnlyTheWholeReplyDecodes(assignment);
}

// Overwrites the i64 at `offset` of an encoded message.
std::string WithI64At(std::string bytes, size_t offset, int64_t value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
  return bytes;
}

TEST(Protocol, ImpossibleListLengthsAreRefusedBeforeAnythingIsAllocated) {
  HelloRequest hello = SomeHello();
  const std::string bytes = EncodeRequest(hello);
  const size_t cores_count = 1 + 3 * sizeof(int64_t);  // op, pid, index, world size
  HelloRequest received;
  for (int64_t count : {int64_t{-1}, int64_t{3}, std::numeric_limits<int64_t>::max()}) {
    Status status = DecodeRequest(WithI64At(bytes, cores_count, count), &received);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << "a list of " << count;
    EXPECT_EQ(status.message(), "malformed hello");
  }
}

TEST(Protocol, OutOfRangeTagsAreRefused) {
  // The placement tag of BufferFromHost is its last field but the bytes: op, core, type, dims, strides, kind.
  BufferFromHostRequest transfer;
  std::string bytes = EncodeRequest(transfer);
  const size_t placement = 1 + 2 * sizeof(int64_t) + 3 * sizeof(int64_t);
  ASSERT_EQ(bytes[placement], static_cast<char>(Placement::kInline));
  bytes[placement] = 7;
  BufferFromHostRequest received;
  EXPECT_EQ(DecodeRequest(bytes, &received).message(), "malformed transfer");

  ToHostRequest to_host;
  to_host.host_layout = TiledLayout();
  std::string layout_bytes = EncodeRequest(to_host);
  const size_t layout_type = 1 + 8 + 1 + 8 + 1 + 1;  // op, buffer, query flag, size, placement, layout flag
  ASSERT_EQ(layout_bytes[layout_type], static_cast<char>(PJRT_Buffer_MemoryLayout_Type_Tiled));
  layout_bytes[layout_type] = 9;
  ToHostRequest received_to_host;
  EXPECT_EQ(DecodeRequest(layout_bytes, &received_to_host).message(), "unknown buffer");

  // Tile sizes that promise more tile dimensions than the message holds.
  ToHostRequest bad_tiles;
  bad_tiles.host_layout = TiledLayout();
  bad_tiles.host_layout->tile_dim_sizes = {2, 5};
  EXPECT_EQ(DecodeRequest(EncodeRequest(bad_tiles), &received_to_host).code(), ErrorCode::kInvalidArgument);

  CostAnalysisReply cost;
  cost.attributes = {{"flag", true}};
  std::string cost_bytes = EncodeReply(cost);
  cost_bytes[cost_bytes.size() - 2] = 5;  // the value's tag
  EXPECT_EQ(DecodeReply<CostAnalysisReply>(cost_bytes).status().code(), ErrorCode::kInternal);

  std::string status_bytes = EncodeReply(Status(ErrorCode::kAborted, "x"));
  status_bytes[0] = 99;  // no such status code
  EXPECT_EQ(DecodeReply<EmptyReply>(status_bytes).status().message(), "malformed reply from the instance daemon");
}

// Found by fuzzing (plugin/fuzz/daemon_frames_fuzzer.cc): an element type no PJRT_Buffer_Type
// can hold was stored into one, which UBSan reports.
TEST(Protocol, ElementTypesOutsideTheEnumAreRefused) {
  for (int64_t type : {int64_t{2057}, int64_t{-1}, int64_t{PJRT_Buffer_Type_F4E2M1FN} + 1}) {
    CreateUninitializedRequest create;
    std::string bytes = EncodeRequest(create);
    std::memcpy(&bytes[1 + sizeof(int64_t)], &type, sizeof(type));  // after op and core
    CreateUninitializedRequest received;
    EXPECT_EQ(DecodeRequest(bytes, &received).message(), "malformed buffer request") << type;
    EXPECT_EQ(received.type, PJRT_Buffer_Type_INVALID);

    BufferInfo info;
    std::string info_bytes = EncodeReply(info);
    std::memcpy(&info_bytes[1 + 4 * sizeof(int64_t)], &type, sizeof(type));  // status, message, id, core, kind
    EXPECT_EQ(DecodeReply<BufferInfo>(info_bytes).status().code(), ErrorCode::kInternal) << type;
  }
  int64_t last = PJRT_Buffer_Type_F4E2M1FN;
  CreateUninitializedRequest create;
  std::string bytes = EncodeRequest(create);
  std::memcpy(&bytes[1 + sizeof(int64_t)], &last, sizeof(last));
  CreateUninitializedRequest received;
  EXPECT_TRUE(DecodeRequest(bytes, &received).ok());
  EXPECT_EQ(received.type, PJRT_Buffer_Type_F4E2M1FN);
}

TEST(Protocol, AnExecutionNeedsOneArgumentListPerCore) {
  ExecuteRequest execute = SomeExecute();
  execute.args.pop_back();
  ExecuteRequest received;
  Status status = DecodeRequest(EncodeRequest(execute), &received);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "malformed execute request");
}

TEST(Protocol, ARequestUnderAnotherOpIsNotDecoded) {
  ExecuteRequest received;
  EXPECT_EQ(DecodeRequest(EncodeRequest(SomeHello()), &received).message(), "malformed execute request");
  EXPECT_EQ(RequestOp(""), Op{0});
}

}  // namespace
}  // namespace pjrt_neuron::engine::remote
