// Test support for the hlo/ readers: loading the canned programs of data/, and building and
// reading HLO protos with field numbers of the tests' own, taken from XLA's hlo.proto and
// xla_data.proto, so a wrong number in hlo/hlo_fields.h is not shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "hlo/wire_format.h"

namespace pjrt_neuron::hlo::testing {

namespace proto {
constexpr uint32_t kWithConfigModule = 1;  // HloModuleProtoWithConfig.hlo_module
constexpr uint32_t kModuleName = 1;        // HloModuleProto
constexpr uint32_t kModuleComputations = 3;
constexpr uint32_t kComputationName = 1;  // HloComputationProto
constexpr uint32_t kComputationInstructions = 2;
constexpr uint32_t kComputationId = 5;
constexpr uint32_t kComputationRootId = 6;
constexpr uint32_t kInstructionName = 1;  // HloInstructionProto
constexpr uint32_t kInstructionOpcode = 2;
constexpr uint32_t kInstructionShape = 3;
constexpr uint32_t kInstructionMetadata = 7;
constexpr uint32_t kInstructionChannelId = 26;
constexpr uint32_t kInstructionCustomCallTarget = 28;
constexpr uint32_t kInstructionId = 35;
constexpr uint32_t kInstructionOperandIds = 36;
constexpr uint32_t kInstructionCalledComputationIds = 38;
constexpr uint32_t kInstructionBackendConfig = 43;
constexpr uint32_t kInstructionReplicaGroups = 49;
constexpr uint32_t kInstructionConstrainLayout = 56;
constexpr uint32_t kInstructionComparisonDirection = 63;
constexpr uint32_t kShapeElementType = 2;  // ShapeProto
constexpr uint32_t kShapeDimensions = 3;
constexpr uint32_t kShapeTupleShapes = 4;
constexpr uint32_t kShapeIsDynamicDimension = 6;
constexpr uint32_t kMetadataOpName = 2;  // OpMetadata
constexpr uint32_t kMetadataSourceFile = 3;
constexpr uint32_t kMetadataSourceLine = 4;
}  // namespace proto

// xla.PrimitiveType values.
enum Type : int { kPred = 1, kS32 = 4, kS64 = 5, kF32 = 11, kF64 = 12, kTuple = 13, kC64 = 15, kF8E4M3FNUZ = 25 };

// ---------------------------------------------------------------- canned programs

// A file of plugin/tests/unit/data: PJRT_NEURON_TEST_DATA is absolute under CMake and relative
// to the runfiles under Bazel. Fails the test when missing.
inline std::string ReadTestData(const std::string& name) {
  std::vector<std::string> candidates = {std::string(PJRT_NEURON_TEST_DATA) + "/" + name};
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    candidates.push_back(std::string(srcdir) + "/" + workspace + "/" + PJRT_NEURON_TEST_DATA + "/" + name);
  }
  for (const std::string& path : candidates) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }
  ADD_FAILURE() << "test data " << name << " not found (tried " << candidates.front() << ")";
  return std::string();
}

// Bytes as hex, for failure messages.
inline std::string HexForTest(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The line of data/make_programs.py marked `# case: <name>`, where a finding must point; 0 if none.
inline int MarkedLine(const std::string& name) {
  std::istringstream source(ReadTestData("make_programs.py"));
  std::string text;
  for (int line = 1; std::getline(source, text); ++line) {
    const std::string marker = "# case: " + name;
    if (text.size() >= marker.size() && text.compare(text.size() - marker.size(), marker.size(), marker) == 0) {
      return line;
    }
  }
  ADD_FAILURE() << "no `# case: " << name << "` in make_programs.py";
  return 0;
}

// The HloModuleProto inside an HloModuleProtoWithConfig.
inline std::string UnwrapConfig(const std::string& with_config) {
  WireReader reader(with_config);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == proto::kWithConfigModule) return f.payload;
  }
  ADD_FAILURE() << "no hlo_module in the HloModuleProtoWithConfig";
  return std::string();
}

// ---------------------------------------------------------------- building

inline std::string ArrayShape(int type, std::initializer_list<int64_t> dimensions) {
  std::string shape;
  AppendVarintField(&shape, proto::kShapeElementType, static_cast<uint64_t>(type));
  for (int64_t d : dimensions) AppendVarintField(&shape, proto::kShapeDimensions, static_cast<uint64_t>(d));
  return shape;
}

inline std::string TupleShape(std::initializer_list<std::string> elements) {
  std::string shape;
  AppendVarintField(&shape, proto::kShapeElementType, kTuple);
  for (const std::string& e : elements) AppendBytesField(&shape, proto::kShapeTupleShapes, e);
  return shape;
}

inline std::string Metadata(const std::string& op_name, const std::string& file, int line) {
  std::string metadata;
  AppendBytesField(&metadata, proto::kMetadataOpName, op_name);
  AppendBytesField(&metadata, proto::kMetadataSourceFile, file);
  AppendVarintField(&metadata, proto::kMetadataSourceLine, static_cast<uint64_t>(line));
  return metadata;
}

// An HloInstructionProto; `extra` is appended as it is (further fields).
inline std::string MakeInstruction(int64_t id, const std::string& opcode, const std::string& shape,
                                   std::initializer_list<int64_t> operands = {}, const std::string& extra = "") {
  std::string instruction;
  AppendBytesField(&instruction, proto::kInstructionName, opcode + "." + std::to_string(id));
  AppendBytesField(&instruction, proto::kInstructionOpcode, opcode);
  AppendBytesField(&instruction, proto::kInstructionShape, shape);
  AppendVarintField(&instruction, proto::kInstructionId, static_cast<uint64_t>(id));
  std::string packed;
  for (int64_t operand : operands) AppendVarint(&packed, static_cast<uint64_t>(operand));
  if (!packed.empty()) AppendBytesField(&instruction, proto::kInstructionOperandIds, packed);
  return instruction + extra;
}

inline std::string MakeComputation(int64_t id, const std::vector<std::string>& instructions, int64_t root_id) {
  std::string computation;
  AppendBytesField(&computation, proto::kComputationName, "computation." + std::to_string(id));
  for (const std::string& i : instructions) AppendBytesField(&computation, proto::kComputationInstructions, i);
  AppendVarintField(&computation, proto::kComputationId, static_cast<uint64_t>(id));
  AppendVarintField(&computation, proto::kComputationRootId, static_cast<uint64_t>(root_id));
  return computation;
}

inline std::string MakeModule(const std::vector<std::string>& computations) {
  std::string module;
  AppendBytesField(&module, proto::kModuleName, "test_module");
  for (const std::string& c : computations) AppendBytesField(&module, proto::kModuleComputations, c);
  return module;
}

// ---------------------------------------------------------------- reading

struct TestInstruction {
  std::string name;
  std::string opcode;
  std::string shape;  // serialized ShapeProto
  int64_t id = 0;
  uint64_t channel_id = 0;
  bool constrain_layout = false;
  std::vector<int64_t> operand_ids;
  std::vector<int64_t> called_computation_ids;
  std::string replica_groups;  // the serialized fields, concatenated
};

struct TestComputation {
  int64_t id = 0;
  int64_t root_id = 0;
  std::vector<TestInstruction> instructions;
};

inline void ReadRepeatedIds(const Field& f, std::vector<int64_t>* ids) {
  if (f.wire_type == kVarint) {
    ids->push_back(static_cast<int64_t>(f.varint));
    return;
  }
  WireReader packed(f.payload);
  uint64_t id;
  while (!packed.done() && packed.Varint(&id)) ids->push_back(static_cast<int64_t>(id));
}

// The computations of a serialized HloModuleProto; fails the test when it is malformed.
inline std::vector<TestComputation> ReadModule(const std::string& module) {
  std::vector<TestComputation> computations;
  WireReader reader(module);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) {
      ADD_FAILURE() << "malformed module";
      break;
    }
    if (f.number != proto::kModuleComputations) continue;
    TestComputation computation;
    WireReader inner(f.payload);
    Field g;
    while (!inner.done() && inner.Next(&g)) {
      if (g.number == proto::kComputationId) computation.id = static_cast<int64_t>(g.varint);
      if (g.number == proto::kComputationRootId) computation.root_id = static_cast<int64_t>(g.varint);
      if (g.number != proto::kComputationInstructions) continue;
      TestInstruction instruction;
      WireReader fields(g.payload);
      Field h;
      while (!fields.done() && fields.Next(&h)) {
        switch (h.number) {
          case proto::kInstructionName: instruction.name = h.payload; break;
          case proto::kInstructionOpcode: instruction.opcode = h.payload; break;
          case proto::kInstructionShape: instruction.shape = h.payload; break;
          case proto::kInstructionId: instruction.id = static_cast<int64_t>(h.varint); break;
          case proto::kInstructionChannelId: instruction.channel_id = h.varint; break;
          case proto::kInstructionConstrainLayout: instruction.constrain_layout = h.varint != 0; break;
          case proto::kInstructionOperandIds: ReadRepeatedIds(h, &instruction.operand_ids); break;
          case proto::kInstructionCalledComputationIds: ReadRepeatedIds(h, &instruction.called_computation_ids); break;
          case proto::kInstructionReplicaGroups: instruction.replica_groups += h.raw; break;
          default: break;
        }
      }
      computation.instructions.push_back(instruction);
    }
    computations.push_back(computation);
  }
  return computations;
}

// The serialized element shapes of a tuple ShapeProto (none for an array shape).
inline std::vector<std::string> TupleElements(const std::string& shape) {
  std::vector<std::string> elements;
  WireReader reader(shape);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == proto::kShapeTupleShapes) elements.push_back(f.payload);
  }
  return elements;
}

inline int ElementType(const std::string& shape) {
  WireReader reader(shape);
  Field f;
  while (!reader.done() && reader.Next(&f)) {
    if (f.number == proto::kShapeElementType) return static_cast<int>(f.varint);
  }
  return 0;
}

}  // namespace pjrt_neuron::hlo::testing
