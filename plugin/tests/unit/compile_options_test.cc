// NormalizeCompileOptions and MapDeviceAssignment (hlo/compile_options.h), on options built
// here and on the options jaxlib serialises (data/options_*.pb, data/assignment_*.pb).
#include "hlo/compile_options.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/wire_format.h"
#include "hlo_test_util.h"

namespace pjrt_neuron::hlo {
namespace {

using testing::ReadTestData;

// Field numbers of xla/pjrt/proto/compile_options.proto and xla/xla_data.proto.
constexpr uint32_t kBuildOptions = 3;       // CompileOptionsProto.executable_build_options
constexpr uint32_t kDeviceOrdinal = 1;      // ExecutableBuildOptionsProto
constexpr uint32_t kDebugOptions = 3;
constexpr uint32_t kNumReplicas = 4;
constexpr uint32_t kNumPartitions = 5;
constexpr uint32_t kDeviceAssignment = 9;
constexpr uint32_t kReplicaCount = 1;       // DeviceAssignmentProto
constexpr uint32_t kComputationCount = 2;
constexpr uint32_t kComputationDevices = 3;
constexpr uint32_t kReplicaDeviceIds = 1;   // DeviceAssignmentProto.ComputationDevice

const DeviceIdMap kSameIds = [](int64_t id) -> StatusOr<int64_t> { return id; };

DeviceIdMap Shift(int64_t by) {
  return [by](int64_t id) -> StatusOr<int64_t> { return id + by; };
}

struct Assignment {
  int64_t replica_count = 0;
  int64_t computation_count = 0;
  std::vector<std::vector<int64_t>> devices;  // [computation][replica]
};

// A DeviceAssignmentProto; ids packed or not.
Assignment ReadAssignment(const std::string& bytes) {
  Assignment a;
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) {
      ADD_FAILURE() << "malformed device assignment";
      break;
    }
    if (f.number == kReplicaCount) a.replica_count = static_cast<int64_t>(f.varint);
    if (f.number == kComputationCount) a.computation_count = static_cast<int64_t>(f.varint);
    if (f.number != kComputationDevices) continue;
    std::vector<int64_t> ids;
    WireReader device(f.payload);
    Field g;
    while (!device.done() && device.Next(&g)) {
      if (g.number == kReplicaDeviceIds) testing::ReadRepeatedIds(g, &ids);
    }
    a.devices.push_back(ids);
  }
  return a;
}

// The ExecutableBuildOptionsProto of a CompileOptionsProto, with its occurrences merged as
// protobuf merges a message field that appears more than once.
struct BuildOptions {
  std::optional<int64_t> device_ordinal;
  std::optional<int64_t> num_replicas;
  std::optional<int64_t> num_partitions;
  std::optional<std::string> device_assignment;
  std::optional<std::string> debug_options;
};

BuildOptions ReadBuildOptions(const std::string& options) {
  BuildOptions b;
  WireReader reader(options);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) {
      ADD_FAILURE() << "malformed compile options";
      break;
    }
    if (f.number != kBuildOptions) continue;
    WireReader build(f.payload);
    Field g;
    while (!build.done() && build.Next(&g)) {
      if (g.number == kDeviceOrdinal) b.device_ordinal = static_cast<int64_t>(g.varint);
      if (g.number == kNumReplicas) b.num_replicas = static_cast<int64_t>(g.varint);
      if (g.number == kNumPartitions) b.num_partitions = static_cast<int64_t>(g.varint);
      if (g.number == kDeviceAssignment) b.device_assignment = g.payload;
      if (g.number == kDebugOptions) b.debug_options = g.payload;
    }
  }
  return b;
}

std::string AssignmentProto(const std::vector<std::vector<int64_t>>& devices, bool packed = true) {
  std::string a;
  AppendVarintField(&a, kReplicaCount, devices.empty() ? 0 : devices[0].size());
  AppendVarintField(&a, kComputationCount, devices.size());
  for (const auto& replicas : devices) {
    std::string device;
    if (packed) {
      std::string ids;
      for (int64_t id : replicas) AppendVarint(&ids, static_cast<uint64_t>(id));
      AppendBytesField(&device, kReplicaDeviceIds, ids);
    } else {
      for (int64_t id : replicas) AppendVarintField(&device, kReplicaDeviceIds, static_cast<uint64_t>(id));
    }
    AppendBytesField(&a, kComputationDevices, device);
  }
  return a;
}

std::string Options(const std::string& build) {
  std::string options;
  AppendBytesField(&options, kBuildOptions, build);
  return options;
}

std::string Counts(int replicas, int partitions) {
  std::string build;
  AppendVarintField(&build, kNumReplicas, static_cast<uint64_t>(replicas));
  AppendVarintField(&build, kNumPartitions, static_cast<uint64_t>(partitions));
  return build;
}

// ---------------------------------------------------------------- counts

TEST(NormalizeCompileOptions, EmptyOptionsGetOneReplicaOnePartition) {
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions("", kSameIds, &layout);
  ASSERT_TRUE(normalized.ok()) << normalized.status().message();
  EXPECT_EQ(layout.num_replicas, 1);
  EXPECT_EQ(layout.num_partitions, 1);
  EXPECT_FALSE(layout.placed);
  BuildOptions b = ReadBuildOptions(*normalized);
  EXPECT_EQ(b.num_replicas, 1);
  EXPECT_EQ(b.num_partitions, 1);
  EXPECT_FALSE(b.device_assignment.has_value());
}

TEST(NormalizeCompileOptions, ZeroCountsBecomeOne) {
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(0, 0)), kSameIds, &layout);
  ASSERT_TRUE(normalized.ok());
  EXPECT_EQ(layout.num_replicas, 1);
  EXPECT_EQ(layout.num_partitions, 1);
  BuildOptions b = ReadBuildOptions(*normalized);
  EXPECT_EQ(b.num_replicas, 1);  // the appended 1 merges over the 0
  EXPECT_EQ(b.num_partitions, 1);
}

TEST(NormalizeCompileOptions, KeepsGivenCounts) {
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(2, 4)), kSameIds, &layout);
  ASSERT_TRUE(normalized.ok());
  EXPECT_EQ(layout.num_replicas, 2);
  EXPECT_EQ(layout.num_partitions, 4);
  EXPECT_EQ(*normalized, Options(Counts(2, 4)));
}

TEST(NormalizeCompileOptions, StartsFromAFreshLayout) {
  ReplicaLayout layout{8, 8, true};
  ASSERT_TRUE(NormalizeCompileOptions("", kSameIds, &layout).ok());
  EXPECT_EQ(layout.num_replicas, 1);
  EXPECT_EQ(layout.num_partitions, 1);
  EXPECT_FALSE(layout.placed);
}

// XLA's own default options: device_ordinal -1 (no device), debug options, no assignment.
TEST(NormalizeCompileOptions, JaxlibDefaultOptions) {
  const std::string options = ReadTestData("options_default.pb");
  ASSERT_EQ(ReadBuildOptions(options).device_ordinal, -1);
  std::vector<int64_t> asked;
  DeviceIdMap recording = [&](int64_t id) -> StatusOr<int64_t> {
    asked.push_back(id);
    return id;
  };
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(options, recording, &layout);
  ASSERT_TRUE(normalized.ok()) << normalized.status().message();
  EXPECT_TRUE(asked.empty()) << "a negative ordinal names no device";
  EXPECT_FALSE(layout.placed);
  EXPECT_EQ(layout.num_replicas, 1);
  EXPECT_EQ(layout.num_partitions, 1);
  BuildOptions b = ReadBuildOptions(*normalized);
  EXPECT_EQ(b.device_ordinal, -1);
  EXPECT_EQ(b.num_replicas, 1);
  EXPECT_EQ(b.num_partitions, 1);
  ASSERT_TRUE(b.debug_options.has_value());
  EXPECT_EQ(b.debug_options->size(), ReadBuildOptions(options).debug_options->size());
}

// The compile pipeline normalises the normalised options again: the bytes must not move.
TEST(NormalizeCompileOptions, NormalizedOptionsAreAFixedPoint) {
  for (const char* file : {"options_default.pb", "options_two_replicas.pb"}) {
    ReplicaLayout layout;
    auto once = NormalizeCompileOptions(ReadTestData(file), kSameIds, &layout);
    ASSERT_TRUE(once.ok()) << file;
    auto twice = NormalizeCompileOptions(*once, kSameIds, &layout);
    ASSERT_TRUE(twice.ok()) << file;
    EXPECT_EQ(*twice, *once) << file;
  }
}

// DebugOptions maps come in hash order; equal options must give equal bytes (the cache key).
TEST(NormalizeCompileOptions, DebugOptionsFieldOrderDoesNotMatter) {
  std::string entry_a, entry_b;
  AppendBytesField(&entry_a, 1, "xla_flag_a");
  AppendBytesField(&entry_b, 1, "xla_flag_b");
  constexpr uint32_t kMapField = 500;  // any repeated message field
  std::string debug_ab, debug_ba;
  AppendVarintField(&debug_ab, 7, 1);
  AppendBytesField(&debug_ab, kMapField, entry_a);
  AppendBytesField(&debug_ab, kMapField, entry_b);
  AppendBytesField(&debug_ba, kMapField, entry_b);
  AppendVarintField(&debug_ba, 7, 1);
  AppendBytesField(&debug_ba, kMapField, entry_a);
  std::string build_ab = Counts(1, 1), build_ba = Counts(1, 1);
  AppendBytesField(&build_ab, kDebugOptions, debug_ab);
  AppendBytesField(&build_ba, kDebugOptions, debug_ba);
  ReplicaLayout layout;
  auto ab = NormalizeCompileOptions(Options(build_ab), kSameIds, &layout);
  auto ba = NormalizeCompileOptions(Options(build_ba), kSameIds, &layout);
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_EQ(*ab, *ba);
}

TEST(NormalizeCompileOptions, KeepsUnknownFields) {
  std::string build = Counts(1, 1);
  AppendVarintField(&build, 6, 1);  // use_spmd_partitioning
  std::string options = Options(build);
  AppendVarintField(&options, 4, 1);  // CompileOptionsProto.compile_portable_executable
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(options, kSameIds, &layout);
  ASSERT_TRUE(normalized.ok());
  EXPECT_EQ(*normalized, options);
}

// ---------------------------------------------------------------- device ids

TEST(NormalizeCompileOptions, MapsJaxlibDeviceAssignment) {
  // jaxlib's options for device_assignment=[5, 7]: two replicas of one partition.
  const std::string options = ReadTestData("options_two_replicas.pb");
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(options, Shift(100), &layout);
  ASSERT_TRUE(normalized.ok()) << normalized.status().message();
  EXPECT_TRUE(layout.placed);
  EXPECT_EQ(layout.num_replicas, 2);
  EXPECT_EQ(layout.num_partitions, 1);
  BuildOptions b = ReadBuildOptions(*normalized);
  ASSERT_TRUE(b.device_assignment.has_value());
  Assignment a = ReadAssignment(*b.device_assignment);
  EXPECT_EQ(a.replica_count, 2);
  EXPECT_EQ(a.computation_count, 1);
  EXPECT_EQ(a.devices, (std::vector<std::vector<int64_t>>{{105, 107}}));
}

TEST(NormalizeCompileOptions, DeviceAssignmentMapsToEngineAndBack) {
  const std::string options = ReadTestData("options_two_replicas.pb");
  DeviceIdMap to_engine = [](int64_t id) -> StatusOr<int64_t> { return id * 3 + 1; };
  DeviceIdMap to_device = [](int64_t core) -> StatusOr<int64_t> { return (core - 1) / 3; };
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(options, to_engine, &layout);
  ASSERT_TRUE(normalized.ok());
  const std::string engine_assignment = *ReadBuildOptions(*normalized).device_assignment;
  EXPECT_EQ(ReadAssignment(engine_assignment).devices, (std::vector<std::vector<int64_t>>{{16, 22}}));
  auto back = MapDeviceAssignment(engine_assignment, to_device);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ReadAssignment(*back).devices, ReadAssignment(*ReadBuildOptions(options).device_assignment).devices);
}

TEST(NormalizeCompileOptions, MapsDeviceOrdinal) {
  std::string build = Counts(1, 1);
  AppendVarintField(&build, kDeviceOrdinal, 3);
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(build), Shift(10), &layout);
  ASSERT_TRUE(normalized.ok());
  EXPECT_TRUE(layout.placed);
  EXPECT_EQ(ReadBuildOptions(*normalized).device_ordinal, 13);
}

TEST(NormalizeCompileOptions, DeviceOrdinalZeroIsADevice) {
  std::string build;
  AppendVarintField(&build, kDeviceOrdinal, 0);
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(build), Shift(4), &layout);
  ASSERT_TRUE(normalized.ok());
  EXPECT_TRUE(layout.placed);
  EXPECT_EQ(ReadBuildOptions(*normalized).device_ordinal, 4);
}

TEST(NormalizeCompileOptions, MappingFailureSurfacesWithTheId) {
  DeviceIdMap only_small = [](int64_t id) -> StatusOr<int64_t> {
    if (id > 5) return InvalidArgument("no device with id " + std::to_string(id));
    return id;
  };
  ReplicaLayout layout;
  auto assigned = NormalizeCompileOptions(ReadTestData("options_two_replicas.pb"), only_small, &layout);
  ASSERT_FALSE(assigned.ok());
  EXPECT_EQ(assigned.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(assigned.status().message().find("no device with id 7"), std::string::npos) << assigned.status().message();

  std::string build;
  AppendVarintField(&build, kDeviceOrdinal, 9);
  DeviceIdMap not_found = [](int64_t id) -> StatusOr<int64_t> {
    return NotFound("device " + std::to_string(id) + " is not addressable");
  };
  auto ordinal = NormalizeCompileOptions(Options(build), not_found, &layout);
  ASSERT_FALSE(ordinal.ok());
  EXPECT_EQ(ordinal.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(ordinal.status().message().find("device 9"), std::string::npos) << ordinal.status().message();
}

// ---------------------------------------------------------------- default placement

TEST(NormalizeCompileOptions, PlacesAnUnplacedProgramOntoTheGivenCores) {
  const std::vector<int64_t> cores = {4, 5, 6};
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(2, 1)), kSameIds, &layout, &cores);
  ASSERT_TRUE(normalized.ok());
  EXPECT_FALSE(layout.placed);  // placed by the caller's options, not by the default
  BuildOptions b = ReadBuildOptions(*normalized);
  ASSERT_TRUE(b.device_assignment.has_value());
  Assignment a = ReadAssignment(*b.device_assignment);
  EXPECT_EQ(a.replica_count, 2);
  EXPECT_EQ(a.computation_count, 1);
  EXPECT_EQ(a.devices, (std::vector<std::vector<int64_t>>{{4, 5}}));
  EXPECT_EQ(b.num_replicas, 2);
}

TEST(NormalizeCompileOptions, DefaultPlacementOfReplicasAndPartitions) {
  // XLA's order: the device of (replica r, partition p) is core p * replicas + r.
  const std::vector<int64_t> cores = {10, 11, 12, 13};
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(2, 2)), kSameIds, &layout, &cores);
  ASSERT_TRUE(normalized.ok());
  Assignment a = ReadAssignment(*ReadBuildOptions(*normalized).device_assignment);
  EXPECT_EQ(a.replica_count, 2);
  EXPECT_EQ(a.computation_count, 2);
  EXPECT_EQ(a.devices, (std::vector<std::vector<int64_t>>{{10, 11}, {12, 13}}));
}

TEST(NormalizeCompileOptions, DefaultPlacementOfEmptyOptions) {
  const std::vector<int64_t> cores = {7};
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions("", kSameIds, &layout, &cores);
  ASSERT_TRUE(normalized.ok());
  BuildOptions b = ReadBuildOptions(*normalized);
  EXPECT_EQ(b.num_replicas, 1);
  ASSERT_TRUE(b.device_assignment.has_value());
  EXPECT_EQ(ReadAssignment(*b.device_assignment).devices, (std::vector<std::vector<int64_t>>{{7}}));
}

TEST(NormalizeCompileOptions, NoDefaultPlacementWhenPlaced) {
  const std::vector<int64_t> cores = {0, 1, 2, 3};
  ReplicaLayout layout;
  auto assigned = NormalizeCompileOptions(ReadTestData("options_two_replicas.pb"), kSameIds, &layout, &cores);
  ASSERT_TRUE(assigned.ok());
  EXPECT_EQ(ReadAssignment(*ReadBuildOptions(*assigned).device_assignment).devices,
            (std::vector<std::vector<int64_t>>{{5, 7}}));

  std::string build = Counts(1, 1);
  AppendVarintField(&build, kDeviceOrdinal, 2);
  auto ordinal = NormalizeCompileOptions(Options(build), kSameIds, &layout, &cores);
  ASSERT_TRUE(ordinal.ok());
  EXPECT_FALSE(ReadBuildOptions(*ordinal).device_assignment.has_value());
  EXPECT_EQ(ReadBuildOptions(*ordinal).device_ordinal, 2);
}

TEST(NormalizeCompileOptions, NoDefaultPlacementOntoTooFewCores) {
  const std::vector<int64_t> cores = {4, 5, 6};
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(2, 2)), kSameIds, &layout, &cores);
  ASSERT_TRUE(normalized.ok());
  EXPECT_FALSE(ReadBuildOptions(*normalized).device_assignment.has_value());
  EXPECT_EQ(layout.num_replicas * layout.num_partitions, 4);  // the caller reports the shortfall
}

TEST(NormalizeCompileOptions, NoDefaultPlacementWithoutCores) {
  ReplicaLayout layout;
  auto normalized = NormalizeCompileOptions(Options(Counts(2, 1)), kSameIds, &layout, nullptr);
  ASSERT_TRUE(normalized.ok());
  EXPECT_FALSE(ReadBuildOptions(*normalized).device_assignment.has_value());
}

// ---------------------------------------------------------------- MapDeviceAssignment

TEST(MapDeviceAssignment, JaxlibAssignmentRoundTrip) {
  const std::string assignment = ReadTestData("assignment_2x2.pb");
  Assignment original = ReadAssignment(assignment);
  ASSERT_EQ(original.replica_count, 2);
  ASSERT_EQ(original.computation_count, 2);
  // jaxlib's array [[1, 2], [3, 4]] is [replica][partition]; the proto lists per partition.
  ASSERT_EQ(original.devices, (std::vector<std::vector<int64_t>>{{1, 3}, {2, 4}}));
  auto there = MapDeviceAssignment(assignment, Shift(40));
  ASSERT_TRUE(there.ok());
  Assignment mapped = ReadAssignment(*there);
  EXPECT_EQ(mapped.replica_count, 2);
  EXPECT_EQ(mapped.computation_count, 2);
  EXPECT_EQ(mapped.devices, (std::vector<std::vector<int64_t>>{{41, 43}, {42, 44}}));
  auto back = MapDeviceAssignment(*there, Shift(-40));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, assignment);  // packed in, packed out: the same bytes
}

TEST(MapDeviceAssignment, AcceptsUnpackedIds) {
  auto mapped = MapDeviceAssignment(AssignmentProto({{1, 2, 3}}, /*packed=*/false), Shift(1));
  ASSERT_TRUE(mapped.ok());
  Assignment a = ReadAssignment(*mapped);
  EXPECT_EQ(a.devices, (std::vector<std::vector<int64_t>>{{2, 3, 4}}));
  EXPECT_EQ(a.replica_count, 3);
  EXPECT_EQ(a.computation_count, 1);
}

TEST(MapDeviceAssignment, EmptyAssignmentStaysEmpty) {
  auto mapped = MapDeviceAssignment("", Shift(1));
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(*mapped, "");
}

TEST(MapDeviceAssignment, MappingFailureSurfaces) {
  DeviceIdMap failing = [](int64_t id) -> StatusOr<int64_t> {
    return InvalidArgument("core " + std::to_string(id) + " belongs to no device");
  };
  auto mapped = MapDeviceAssignment(AssignmentProto({{3}}), failing);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().message(), "core 3 belongs to no device");
}

// ---------------------------------------------------------------- malformed bytes

TEST(NormalizeCompileOptions, MalformedBytesAreInvalidArgument) {
  std::string bad_assignment = Counts(1, 1);
  AppendBytesField(&bad_assignment, kDeviceAssignment, std::string("\x1a\x05\x0a", 3));
  std::string bad_ids = Counts(1, 1);
  AppendBytesField(&bad_ids, kDeviceAssignment, AssignmentProto({{1}}) + std::string("\x1a\x02\x0a\x80", 4));
  std::string bad_debug = Counts(1, 1);
  AppendBytesField(&bad_debug, kDebugOptions, std::string("\x08", 1));
  const std::vector<std::string> malformed = {
      std::string("\x1a\x10", 2),                   // a length past the end
      std::string("\x1a", 1),                       // a tag without its field
      std::string("\x0b\x00", 2),                   // a group
      Options(std::string("\x20\x80", 2)),          // a truncated num_replicas
      Options(bad_assignment), Options(bad_ids), Options(bad_debug),
  };
  for (const std::string& options : malformed) {
    ReplicaLayout layout;
    auto normalized = NormalizeCompileOptions(options, kSameIds, &layout);
    ASSERT_FALSE(normalized.ok()) << testing::HexForTest(options);
    EXPECT_EQ(normalized.status().code(), ErrorCode::kInvalidArgument);
  }
  auto assignment = MapDeviceAssignment(std::string("\x1a\x03\x0a\x05\x01", 5), kSameIds);
  ASSERT_FALSE(assignment.ok());
  EXPECT_EQ(assignment.status().code(), ErrorCode::kInvalidArgument);
}

// Every prefix and every one-byte change of real options: an answer each time, never a crash.
TEST(NormalizeCompileOptions, DamagedJaxlibOptionsNeverCrash) {
  const std::string options = ReadTestData("options_two_replicas.pb");
  const std::vector<int64_t> cores = {0, 1, 2, 3};
  int rejected = 0;
  auto check = [&](const std::string& bytes) {
    ReplicaLayout layout;
    auto normalized = NormalizeCompileOptions(bytes, kSameIds, &layout, &cores);
    if (!normalized.ok()) {
      EXPECT_EQ(normalized.status().code(), ErrorCode::kInvalidArgument);
      ++rejected;
    }
  };
  for (size_t n = 0; n < options.size(); ++n) check(options.substr(0, n));
  for (size_t at = 0; at < options.size(); ++at) {
    for (int value : {0x00, 0x7f, 0x80, 0xff}) {
      std::string damaged = options;
      damaged[at] = static_cast<char>(value);
      check(damaged);
    }
  }
  EXPECT_GT(rejected, 0);
}

// ---------------------------------------------------------------- portable single-core copies

TEST(PortableSingleCoreOptions, OneCoreNoPlacementPortableAndTheRestKept) {
  std::string build = Counts(2, 1);
  AppendVarintField(&build, kDeviceOrdinal, 1);
  AppendBytesField(&build, kDeviceAssignment, AssignmentProto({{0, 1}}));
  AppendBytesField(&build, kDebugOptions, "\x08\x01");
  std::string options = Options(build);
  AppendVarintField(&options, 2, 1);      // parameter_is_tupled_arguments, kept
  AppendVarintField(&options, 4, 0);      // compile_portable_executable, replaced
  AppendBytesField(&options, 7, "flag");  // env_option_overrides, kept
  const std::string portable = PortableSingleCoreOptions(options);
  const BuildOptions b = ReadBuildOptions(portable);
  EXPECT_EQ(b.num_replicas, 1);
  EXPECT_EQ(b.num_partitions, 1);
  EXPECT_FALSE(b.device_ordinal.has_value());
  EXPECT_FALSE(b.device_assignment.has_value());
  EXPECT_EQ(b.debug_options, std::string("\x08\x01"));
  std::vector<std::pair<uint32_t, uint64_t>> varints;
  std::string overrides;
  WireReader reader(portable);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.wire_type == kVarint) varints.emplace_back(f.number, f.varint);
    if (f.number == 7) overrides = f.payload;
  }
  EXPECT_EQ(varints, (std::vector<std::pair<uint32_t, uint64_t>>{{2, 1}, {4, 1}}));
  EXPECT_EQ(overrides, "flag");
}

TEST(PortableSingleCoreOptions, MalformedOptionsGiveNothing) {
  EXPECT_EQ(PortableSingleCoreOptions(std::string("\x1a\x05\x20", 3)), "");
  EXPECT_NE(PortableSingleCoreOptions(""), "");  // no options: the defaults, made portable
}

TEST(CompileOptionsOfSerializedExecutable, ReadsFieldTwo) {
  const std::string options = Options(Counts(2, 1));
  std::string executable;
  AppendBytesField(&executable, 1, "object code");
  AppendBytesField(&executable, 2, options);
  EXPECT_EQ(CompileOptionsOfSerializedExecutable(executable), options);
  EXPECT_EQ(CompileOptionsOfSerializedExecutable("\x0a\x01x"), "");
}

}  // namespace
}  // namespace pjrt_neuron::hlo
