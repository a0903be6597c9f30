// Field numbers of XLA's HLO protos (xla/service/hlo.proto, xla/xla_data.proto), read and
// written with wire_format.h; shared by every reader and rewriter of programs in hlo/.
#pragma once

#include <cstdint>
#include <string>

#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo {

namespace hlo_fields {
constexpr uint32_t kWithConfigModule = 1;  // HloModuleProtoWithConfig.hlo_module
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
}  // namespace hlo_fields

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

}  // namespace pjrt_neuron::hlo
