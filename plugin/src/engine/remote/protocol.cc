// The fields of every message between a framework process and the instance daemon, in order.
#include "engine/remote/protocol.h"

#include <cstring>
#include <variant>

namespace pjrt_neuron::engine::remote {
namespace {

// The smallest encoding of an element of a list, so a count can be checked against the bytes
// left before anything is allocated.
constexpr size_t kMinInts = sizeof(int64_t);                 // an empty list: its count
constexpr size_t kMinBufferInfo = 6 * sizeof(int64_t) + 1;   // id, core, kind, type, dims, size, layout flag
constexpr size_t kMinMember = 3 * sizeof(int64_t);           // index, pid, cores
constexpr size_t kMinOutputShape = 3 * sizeof(int64_t);      // type, dims, kind
constexpr size_t kMinAttribute = sizeof(int64_t) + 1 + 1;    // name, tag, a bool value

Placement ReadPlacement(Reader& r) {
  uint8_t value = r.u8();
  if (value > static_cast<uint8_t>(Placement::kWindow)) r.Fail();
  return static_cast<Placement>(value);
}

// A value outside the enum's range may not even be held by a PJRT_Buffer_Type (found by
// fuzzing: UBSan reports the load of one); a newer type is the other end's version mismatch.
PJRT_Buffer_Type ReadBufferType(Reader& r) {
  int64_t value = r.i64();
  if (value < PJRT_Buffer_Type_INVALID || value > PJRT_Buffer_Type_F4E2M1FN) {
    r.Fail();
    return PJRT_Buffer_Type_INVALID;
  }
  return static_cast<PJRT_Buffer_Type>(value);
}

bool ReadFlag(Reader& r) {
  uint8_t value = r.u8();
  if (value > 1) r.Fail();
  return value == 1;
}

void WriteAttributes(Writer& w, const Attributes& attributes) {
  w.i64(static_cast<int64_t>(attributes.size()));
  for (const Attribute& a : attributes) {
    w.str(a.name).u8(static_cast<uint8_t>(a.value.index()));
    if (auto* s = std::get_if<std::string>(&a.value)) w.str(*s);
    if (auto* i = std::get_if<int64_t>(&a.value)) w.i64(*i);
    if (auto* v = std::get_if<std::vector<int64_t>>(&a.value)) w.ints(*v);
    if (auto* f = std::get_if<float>(&a.value)) w.f64(*f);
    if (auto* b = std::get_if<bool>(&a.value)) w.u8(*b ? 1 : 0);
  }
}

Attributes ReadAttributes(Reader& r) {
  Attributes attributes(static_cast<size_t>(r.count(kMinAttribute)));
  for (Attribute& a : attributes) {
    a.name = r.str();
    switch (r.u8()) {  // the variant's index, as WriteAttributes wrote it
      case 0: a.value = r.str(); break;
      case 1: a.value = r.i64(); break;
      case 2: a.value = r.ints(); break;
      case 3: a.value = static_cast<float>(r.f64()); break;
      case 4: a.value = ReadFlag(r); break;
      default: r.Fail(); break;
    }
    if (!r.ok()) return {};
  }
  return attributes;
}

}  // namespace

LayoutData LayoutData::From(const PJRT_Buffer_MemoryLayout& layout) {
  LayoutData data;
  data.type = layout.type;
  if (layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    const auto& t = layout.tiled;
    data.minor_to_major.assign(t.minor_to_major, t.minor_to_major + t.minor_to_major_size);
    size_t total_tile_dims = 0;
    for (size_t i = 0; i < t.num_tiles; ++i) total_tile_dims += t.tile_dim_sizes[i];
    data.tile_dim_sizes.assign(t.tile_dim_sizes, t.tile_dim_sizes + t.num_tiles);
    data.tile_dims.assign(t.tile_dims, t.tile_dims + total_tile_dims);
  } else {
    data.byte_strides.assign(layout.strides.byte_strides, layout.strides.byte_strides + layout.strides.num_byte_strides);
  }
  return data;
}

void LayoutData::Fill(PJRT_Buffer_MemoryLayout* layout) const {
  std::memset(layout, 0, sizeof(*layout));
  layout->struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  layout->type = type;
  if (type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    layout->tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    layout->tiled.minor_to_major = minor_to_major.data();
    layout->tiled.minor_to_major_size = minor_to_major.size();
    layout->tiled.tile_dims = tile_dims.data();
    layout->tiled.tile_dim_sizes = tile_dim_sizes.data();
    layout->tiled.num_tiles = tile_dim_sizes.size();
  } else {
    layout->strides.struct_size = PJRT_Buffer_MemoryLayout_Strides_STRUCT_SIZE;
    layout->strides.byte_strides = byte_strides.data();
    layout->strides.num_byte_strides = byte_strides.size();
  }
}

void LayoutData::Write(Writer& w) const {
  w.u8(static_cast<uint8_t>(type)).ints(minor_to_major).ints(tile_dims).ints(tile_dim_sizes).ints(byte_strides);
}

void LayoutData::Read(Reader& r) {
  uint8_t kind = r.u8();
  if (kind != PJRT_Buffer_MemoryLayout_Type_Tiled && kind != PJRT_Buffer_MemoryLayout_Type_Strides) r.Fail();
  type = static_cast<PJRT_Buffer_MemoryLayout_Type>(kind);
  minor_to_major = r.ints();
  tile_dims = r.ints();
  tile_dim_sizes = r.ints<size_t>();
  byte_strides = r.ints();
  size_t total_tile_dims = 0;
  for (size_t size : tile_dim_sizes) total_tile_dims += size;
  if (total_tile_dims != tile_dims.size()) r.Fail();  // Fill's tiles would read past tile_dims
}

void PlacedBytes::Write(Writer& w) const {
  w.u8(static_cast<uint8_t>(placement));
  if (placement == Placement::kWindow) {
    w.i64(window_bytes);
  } else {
    w.str(data);
  }
}

void PlacedBytes::Read(Reader& r) {
  placement = ReadPlacement(r);
  if (placement == Placement::kWindow) {
    window_bytes = r.i64();
    if (window_bytes < 0) r.Fail();
  } else {
    data = r.view();
  }
}

void BufferInfo::Write(Writer& w) const {
  w.i64(id).i64(core).str(memory_kind).i64(type).ints(dims).i64(size).u8(layout.has_value() ? 1 : 0);
  if (layout) layout->Write(w);
}

void BufferInfo::Read(Reader& r) {
  id = r.i64();
  core = static_cast<int>(r.i64());
  memory_kind = r.str();
  type = ReadBufferType(r);
  dims = r.ints();
  size = r.i64();
  layout.reset();
  if (ReadFlag(r)) layout.emplace().Read(r);
}

void ExecutableInfo::Write(Writer& w) const {
  w.i64(id).str(name).i64(replicas).i64(partitions).ints(cores).i64(static_cast<int64_t>(outputs.size()));
  for (const OutputShape& o : outputs) w.i64(o.type).ints(o.dims).str(o.memory_kind);
}

void ExecutableInfo::Read(Reader& r) {
  id = r.i64();
  name = r.str();
  replicas = static_cast<int>(r.i64());
  partitions = static_cast<int>(r.i64());
  cores = r.ints<int>();
  outputs.assign(static_cast<size_t>(r.count(kMinOutputShape)), OutputShape{});
  for (OutputShape& o : outputs) {
    o.type = ReadBufferType(r);
    o.dims = r.ints();
    o.memory_kind = r.str();
  }
}

void HelloRequest::Write(Writer& w) const {
  w.i64(pid).i64(process_index).i64(world_size).ints(cores).f64(timeout_seconds);
}

void HelloRequest::Read(Reader& r) {
  pid = static_cast<int>(r.i64());
  process_index = static_cast<int>(r.i64());
  world_size = static_cast<int>(r.i64());
  cores = r.ints<int>();
  timeout_seconds = r.f64();
}

void HelloReply::Write(Writer& w) const {
  w.str(description).i64(num_cores).i64(session).i64(static_cast<int64_t>(world.size()));
  for (const JobMember& m : world) w.i64(m.process_index).i64(m.pid).ints(m.cores);
}

void HelloReply::Read(Reader& r) {
  description = r.str();
  num_cores = static_cast<int>(r.i64());
  session = r.i64();
  world.assign(static_cast<size_t>(r.count(kMinMember)), JobMember{});
  for (JobMember& m : world) {
    m.process_index = static_cast<int>(r.i64());
    m.pid = static_cast<int>(r.i64());
    m.cores = r.ints<int>();
  }
}

void AttachRequest::Write(Writer& w) const { w.i64(session); }
void AttachRequest::Read(Reader& r) { session = r.i64(); }

void BufferFromHostRequest::Write(Writer& w) const {
  w.i64(core).i64(type).ints(dims).ints(byte_strides).str(memory_kind);
  bytes.Write(w);
}

void BufferFromHostRequest::Read(Reader& r) {
  core = static_cast<int>(r.i64());
  type = ReadBufferType(r);
  dims = r.ints();
  byte_strides = r.ints();
  memory_kind = r.str();
  bytes.Read(r);
}

void CreateUninitializedRequest::Write(Writer& w) const { w.i64(core).i64(type).ints(dims); }

void CreateUninitializedRequest::Read(Reader& r) {
  core = static_cast<int>(r.i64());
  type = ReadBufferType(r);
  dims = r.ints();
}

void ToHostRequest::Write(Writer& w) const {
  w.i64(buffer).u8(query_only ? 1 : 0).i64(dst_size).u8(static_cast<uint8_t>(placement));
  w.u8(host_layout.has_value() ? 1 : 0);
  if (host_layout) host_layout->Write(w);
}

void ToHostRequest::Read(Reader& r) {
  buffer = r.i64();
  query_only = ReadFlag(r);
  dst_size = r.i64();
  placement = ReadPlacement(r);
  host_layout.reset();
  if (ReadFlag(r)) host_layout.emplace().Read(r);
}

void ToHostReply::Write(Writer& w) const {
  w.i64(required_size);
  bytes.Write(w);
}

void ToHostReply::Read(Reader& r) {
  required_size = r.i64();
  bytes.Read(r);
}

void CopyRawToHostRequest::Write(Writer& w) const {
  w.i64(buffer).i64(offset).i64(size).u8(static_cast<uint8_t>(placement));
}

void CopyRawToHostRequest::Read(Reader& r) {
  buffer = r.i64();
  offset = r.i64();
  size = r.i64();
  placement = ReadPlacement(r);
}

void CopyRawToHostReply::Write(Writer& w) const { bytes.Write(w); }
void CopyRawToHostReply::Read(Reader& r) { bytes.Read(r); }

void CopyToRequest::Write(Writer& w) const { w.i64(buffer).i64(core).str(memory_kind); }

void CopyToRequest::Read(Reader& r) {
  buffer = r.i64();
  core = static_cast<int>(r.i64());
  memory_kind = r.str();
}

void CompileRequest::Write(Writer& w) const { w.str(format).str(code).str(options); }

void CompileRequest::Read(Reader& r) {
  format = r.str();
  code = r.view();
  options = r.str();
}

void DeserializeRequest::Write(Writer& w) const {
  w.str(bytes).u8(options.has_value() ? 1 : 0).str(options.value_or(std::string()));
}

void DeserializeRequest::Read(Reader& r) {
  bytes = r.view();
  bool has_options = ReadFlag(r);
  std::string text = r.str();
  options.reset();
  if (has_options) options = std::move(text);
}

void ExecutableQueryRequest::Write(Writer& w) const { w.i64(executable).u8(static_cast<uint8_t>(what)); }

void ExecutableQueryRequest::Read(Reader& r) {
  executable = r.i64();
  what = static_cast<Query>(r.u8());  // an unknown one is the daemon's to refuse, by name
}

void MemoryStatsReply::Write(Writer& w) const {
  w.i64(stats.generated_code_size_in_bytes).i64(stats.argument_size_in_bytes).i64(stats.output_size_in_bytes);
  w.i64(stats.alias_size_in_bytes).i64(stats.temp_size_in_bytes).i64(stats.peak_memory_in_bytes);
}

void MemoryStatsReply::Read(Reader& r) {
  stats.generated_code_size_in_bytes = r.i64();
  stats.argument_size_in_bytes = r.i64();
  stats.output_size_in_bytes = r.i64();
  stats.alias_size_in_bytes = r.i64();
  stats.temp_size_in_bytes = r.i64();
  stats.peak_memory_in_bytes = r.i64();
}

void CostAnalysisReply::Write(Writer& w) const { WriteAttributes(w, attributes); }
void CostAnalysisReply::Read(Reader& r) { attributes = ReadAttributes(r); }

void OptimizedProgramReply::Write(Writer& w) const { w.str(program.format).str(program.code); }

void OptimizedProgramReply::Read(Reader& r) {
  program.format = r.str();
  program.code = r.str();
}

void ExecuteRequest::Write(Writer& w) const {
  w.i64(executable).i64(launch_id).ints(non_donatable_input_indices).f64(timeout_seconds).ints(cores);
  w.i64(static_cast<int64_t>(args.size()));
  for (const auto& list : args) w.ints(list);
}

void ExecuteRequest::Read(Reader& r) {
  executable = r.i64();
  launch_id = static_cast<int>(r.i64());
  non_donatable_input_indices = r.ints();
  timeout_seconds = r.f64();
  cores = r.ints<int>();
  args.assign(static_cast<size_t>(r.count(kMinInts)), {});
  for (auto& list : args) list = r.ints();
  if (args.size() != cores.size()) r.Fail();  // one argument list per core
}

void ExecuteReply::Write(Writer& w) const {
  w.i64(static_cast<int64_t>(cores.size()));
  for (const CoreResult& core : cores) {
    w.i64(static_cast<int64_t>(core.outputs.size()));
    for (const BufferInfo& output : core.outputs) output.Write(w);
    w.ints(core.donated);
  }
}

void ExecuteReply::Read(Reader& r) {
  cores.assign(static_cast<size_t>(r.count(2 * kMinInts)), CoreResult{});
  for (CoreResult& core : cores) {
    core.outputs.assign(static_cast<size_t>(r.count(kMinBufferInfo)), BufferInfo{});
    for (BufferInfo& output : core.outputs) output.Read(r);
    core.donated = r.ints();
  }
}

void DefaultDeviceAssignmentRequest::Write(Writer& w) const { w.i64(replicas).i64(partitions); }

void DefaultDeviceAssignmentRequest::Read(Reader& r) {
  replicas = static_cast<int>(r.i64());
  partitions = static_cast<int>(r.i64());
}

Op RequestOp(const std::string& payload) {
  return payload.empty() ? Op{0} : static_cast<Op>(static_cast<uint8_t>(payload[0]));
}

void WriteStatus(Writer& w, const Status& status) {
  w.u8(static_cast<uint8_t>(status.code()));
  w.str(status.message());
}

Status ReadStatus(Reader& r) {
  uint8_t code = r.u8();
  std::string message = r.str();
  if (!r.ok() || code > static_cast<uint8_t>(ErrorCode::kUnauthenticated)) {
    return Internal("malformed reply from the instance daemon");
  }
  return code == 0 ? Status::Ok() : Status(static_cast<ErrorCode>(code), message);
}

std::string EncodeReply(const Status& status) {
  Writer w;
  WriteStatus(w, status);
  return std::move(w.buffer());
}

}  // namespace pjrt_neuron::engine::remote
