// Field numbers of the XLA protos the plugin reads and writes without protobuf: HLO programs
// (xla/service/hlo.proto, xla/xla_data.proto) and compile options
// (xla/pjrt/proto/compile_options.proto). The one table: hlo/ and the engines include it.
#pragma once

#include <cstdint>
#include <string>

#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {

namespace hlo_fields {
constexpr uint32_t kWithConfigModule = 1;  // HloModuleProtoWithConfig.hlo_module
constexpr uint32_t kWithConfigConfig = 2;  // HloModuleProtoWithConfig.config
constexpr uint32_t kConfigEntryLayout = 1;  // HloModuleConfigProto.entry_computation_layout
constexpr uint32_t kConfigReplicas = 4;
constexpr uint32_t kConfigPartitions = 5;
constexpr uint32_t kModuleName = 1;        // HloModuleProto
constexpr uint32_t kModuleComputations = 3;
constexpr uint32_t kModuleIsDynamic = 11;
constexpr uint32_t kComputationInstructions = 2;  // HloComputationProto
constexpr uint32_t kComputationId = 5;
constexpr uint32_t kInstructionName = 1;  // HloInstructionProto
constexpr uint32_t kInstructionOpcode = 2;
constexpr uint32_t kInstructionShape = 3;
constexpr uint32_t kInstructionMetadata = 7;
constexpr uint32_t kInstructionLiteral = 8;
constexpr uint32_t kInstructionChannelId = 26;
constexpr uint32_t kInstructionCustomCallTarget = 28;
constexpr uint32_t kInstructionCustomCallApiVersion = 77;  // 4: typed FFI (API_VERSION_TYPED_FFI)
constexpr uint32_t kInstructionId = 35;
constexpr uint32_t kInstructionOperandIds = 36;
constexpr uint32_t kInstructionCalledComputations = 38;
constexpr uint32_t kInstructionBackendConfig = 43;
constexpr uint32_t kInstructionReplicaGroups = 49;
constexpr uint32_t kInstructionSourceTargetPairs = 52;
constexpr uint32_t kInstructionConstrainLayout = 56;
constexpr uint32_t kInstructionUseGlobalDeviceIds = 71;
constexpr uint32_t kInstructionComparisonDirection = 63;
constexpr uint32_t kInstructionCollectiveDeviceList = 87;
constexpr uint32_t kShapeElementType = 2;  // ShapeProto
constexpr uint32_t kShapeTupleShapes = 4;
constexpr uint32_t kShapeIsDynamicDimension = 6;
constexpr uint32_t kLiteralS64s = 5;  // LiteralProto
constexpr uint32_t kMetadataOpName = 2;  // OpMetadata
constexpr uint32_t kMetadataSourceFile = 3;
constexpr uint32_t kMetadataSourceLine = 4;
constexpr uint32_t kMetadataStackFrameId = 15;  // OpMetadata.stack_frame_id (1-based; 0: none)
constexpr uint32_t kModuleStackFrameIndex = 17;  // HloModuleProto.stack_frame_index
constexpr uint32_t kFrameIndexFileNames = 1;     // StackFrameIndexProto
constexpr uint32_t kFrameIndexFileLocations = 3;
constexpr uint32_t kFrameIndexStackFrames = 4;
constexpr uint32_t kFileLocationFileNameId = 1;  // StackFrameIndexProto.FileLocation
constexpr uint32_t kFileLocationLine = 3;
constexpr uint32_t kStackFrameFileLocationId = 1;  // StackFrameIndexProto.StackFrame
constexpr uint32_t kModuleEntryName = 2;  // HloModuleProto.entry_computation_name
constexpr uint32_t kModuleHostProgramShape = 4;  // HloModuleProto.host_program_shape
constexpr uint32_t kModuleEntryComputationId = 6;  // HloModuleProto.entry_computation_id
constexpr uint32_t kComputationName = 1;  // HloComputationProto
constexpr uint32_t kComputationRootId = 6;
constexpr uint32_t kInstructionParameterNumber = 9;  // HloInstructionProto
constexpr uint32_t kInstructionDimensions = 14;
constexpr uint32_t kInstructionDotDimensionNumbers = 30;
constexpr uint32_t kInstructionFrontendAttributes = 68;
constexpr uint32_t kShapeDimensions = 3;  // ShapeProto
constexpr uint32_t kShapeLayout = 5;
constexpr uint32_t kLayoutMemorySpace = 8;  // LayoutProto
constexpr uint32_t kProgramShapeParameters = 1;  // ProgramShapeProto
constexpr uint32_t kProgramShapeResult = 2;
constexpr uint32_t kDotLhsContracting = 1;  // DotDimensionNumbers
constexpr uint32_t kDotRhsContracting = 2;
constexpr uint32_t kDotLhsBatch = 3;
constexpr uint32_t kModuleSchedule = 7;  // HloModuleProto.schedule
constexpr uint32_t kModuleAliases = 8;   // HloModuleProto.input_output_alias
constexpr uint32_t kAliasEntries = 1;    // HloInputOutputAliasProto
constexpr uint32_t kAliasOutputIndex = 1;  // HloInputOutputAliasProto.AliasEntryProto
constexpr uint32_t kAliasParameterNumber = 2;
constexpr uint32_t kAliasParameterIndex = 3;
constexpr uint32_t kAliasKind = 4;
constexpr uint64_t kAliasKindMustAlias = 2;  // xla.Kind MUST_ALIAS
constexpr uint32_t kInstructionConvolutionDimensionNumbers = 16;  // HloInstructionProto
constexpr uint32_t kConvKernelOutputFeature = 4;  // ConvolutionDimensionNumbers
constexpr uint32_t kReplicaGroupIds = 1;          // ReplicaGroup.replica_ids
constexpr uint32_t kDeviceListGroups = 1;         // CollectiveDeviceListProto.replica_groups
constexpr uint32_t kDeviceListIota = 2;           // CollectiveDeviceListProto.iota_replica_group_list
constexpr uint32_t kIotaDevicesPerGroup = 2;      // IotaReplicaGroupListProto.num_devices_per_group
constexpr uint32_t kMapKey = 1;                   // every map entry (FrontendAttributes.map, ...)
constexpr uint32_t kMapValue = 2;
constexpr uint32_t kLayoutMinorToMajor = 1;  // LayoutProto
constexpr uint32_t kLiteralShape = 1;        // LiteralProto
constexpr uint32_t kLiteralF32s = 8;
}  // namespace hlo_fields

// xla/pjrt/proto/compile_options.proto and the messages it holds (xla/xla.proto, xla_data.proto).
namespace compile_options_fields {
constexpr uint32_t kBuildOptions = 3;  // CompileOptionsProto.executable_build_options
constexpr uint32_t kCompilePortableExecutable = 4;
constexpr uint32_t kEnvOptionOverrides = 7;
constexpr uint32_t kOverrideString = 1;  // OptionOverrideProto
constexpr uint32_t kOverrideBool = 2;
constexpr uint32_t kExecutableCompileOptions = 2;  // ExecutableAndOptionsProto.compile_options
constexpr uint32_t kDeviceOrdinal = 1;  // ExecutableBuildOptionsProto
constexpr uint32_t kDebugOptions = 3;
constexpr uint32_t kNumReplicas = 4;
constexpr uint32_t kNumPartitions = 5;
constexpr uint32_t kUseSpmdPartitioning = 6;
constexpr uint32_t kDeviceAssignment = 9;
constexpr uint32_t kAssignmentReplicaCount = 1;  // DeviceAssignmentProto
constexpr uint32_t kAssignmentComputationCount = 2;
constexpr uint32_t kAssignmentComputationDevices = 3;
constexpr uint32_t kComputationDeviceReplicaIds = 1;  // DeviceAssignmentProto.ComputationDevice
}  // namespace compile_options_fields

constexpr int kTupleElementType = 13;  // xla.PrimitiveType TUPLE

// The HloModuleProto of a serialized "hlo" or "hlo_with_config" program; empty when missing.
inline std::string HloModuleBytes(const std::string& program, bool with_config) {
  if (!with_config) return program;
  std::string module;
  WireReader reader(program);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == hlo_fields::kWithConfigModule && f.wire_type == kLengthDelimited) module = f.payload;
  }
  return module;
}

// The "hlo_with_config" program with `module` in place of its HloModuleProto, the config kept.
inline std::string WithHloModule(const std::string& program, const std::string& module) {
  std::string wrapped;
  WireReader reader(program);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == hlo_fields::kWithConfigModule) {
      AppendBytesField(&wrapped, f.number, module);
    } else {
      wrapped += f.raw;
    }
  }
  return wrapped;
}

}  // namespace pjrt_neuron::hlo
