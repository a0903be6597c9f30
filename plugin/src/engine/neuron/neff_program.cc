// The serialised form of a compiled program (neff_program.h): a magic line, then protobuf
// wire-format fields, so that a reader skips what it does not know.
#include "engine/neuron/neff_program.h"

#include "hlo/wire_format.h"

namespace pjrt_neuron::engine::neuron {
namespace {

using hlo::Field;
using hlo::WireReader;

constexpr char kMagic[] = "pjrt-neuron-neff/1\n";

enum : uint32_t {
  kName = 1, kReplicas = 2, kPartitions = 3, kCore = 4, kParameter = 5, kOutput = 6, kAlias = 7,
  kHlo = 8, kNeff = 9, kMadeBy = 10, kModuleName = 11,
};
enum : uint32_t { kElementType = 1, kDim = 2 };                      // an array
enum : uint32_t { kAliasOutput = 1, kAliasParameter = 2, kAliasMust = 3 };  // an alias

std::string ArrayBytes(const hlo::ArraySignature& array) {
  std::string out;
  hlo::AppendVarintField(&out, kElementType, static_cast<uint64_t>(array.element_type));
  for (int64_t d : array.dims) hlo::AppendVarintField(&out, kDim, static_cast<uint64_t>(d));
  return out;
}

bool ReadArray(const std::string& bytes, hlo::ArraySignature* array) {
  WireReader reader(bytes);
  Field f;
  while (!reader.done()) {
    if (!reader.Next(&f)) return false;
    if (f.number == kElementType) array->element_type = static_cast<int>(f.varint);
    if (f.number == kDim) array->dims.push_back(static_cast<int64_t>(f.varint));
  }
  return true;
}

}  // namespace

std::string SerializeNeffProgram(const NeffProgram& p) {
  std::string out = kMagic;
  hlo::AppendBytesField(&out, kName, p.name);
  hlo::AppendVarintField(&out, kReplicas, static_cast<uint64_t>(p.num_replicas));
  hlo::AppendVarintField(&out, kPartitions, static_cast<uint64_t>(p.num_partitions));
  for (int core : p.cores) hlo::AppendVarintField(&out, kCore, static_cast<uint64_t>(core));
  hlo::AppendBytesField(&out, kModuleName, p.signature.module_name);
  for (const auto& array : p.signature.parameters) hlo::AppendBytesField(&out, kParameter, ArrayBytes(array));
  for (const auto& array : p.signature.outputs) hlo::AppendBytesField(&out, kOutput, ArrayBytes(array));
  for (const hlo::OutputAlias& alias : p.signature.aliases) {
    std::string entry;
    hlo::AppendVarintField(&entry, kAliasOutput, static_cast<uint64_t>(alias.output));
    hlo::AppendVarintField(&entry, kAliasParameter, static_cast<uint64_t>(alias.parameter));
    hlo::AppendVarintField(&entry, kAliasMust, alias.must_alias ? 1 : 0);
    hlo::AppendBytesField(&out, kAlias, entry);
  }
  hlo::AppendBytesField(&out, kHlo, p.hlo_module);
  hlo::AppendBytesField(&out, kNeff, p.neff);
  hlo::AppendBytesField(&out, kMadeBy, p.made_by);
  return out;
}

StatusOr<NeffProgram> DeserializeNeffProgram(const std::string& bytes) {
  const std::string magic = kMagic;
  if (bytes.compare(0, magic.size(), magic) != 0) {
    return InvalidArgument("the serialized executable was not made by the Neuron engine (no NEFF)");
  }
  NeffProgram p;
  const std::string fields = bytes.substr(magic.size());  // the reader keeps pointers into it
  WireReader reader(fields);
  Field f;
  auto corrupt = [] { return InvalidArgument("the serialized Neuron executable is corrupt"); };
  while (!reader.done()) {
    if (!reader.Next(&f)) return corrupt();
    switch (f.number) {
      case kName: p.name = f.payload; break;
      case kReplicas: p.num_replicas = static_cast<int>(f.varint); break;
      case kPartitions: p.num_partitions = static_cast<int>(f.varint); break;
      case kCore: p.cores.push_back(static_cast<int>(f.varint)); break;
      case kModuleName: p.signature.module_name = f.payload; break;
      case kParameter:
      case kOutput: {
        hlo::ArraySignature array;
        if (!ReadArray(f.payload, &array)) return corrupt();
        (f.number == kParameter ? p.signature.parameters : p.signature.outputs).push_back(std::move(array));
        break;
      }
      case kAlias: {
        hlo::OutputAlias alias;
        WireReader entry(f.payload);
        Field g;
        while (!entry.done()) {
          if (!entry.Next(&g)) return corrupt();
          if (g.number == kAliasOutput) alias.output = static_cast<int>(g.varint);
          if (g.number == kAliasParameter) alias.parameter = static_cast<int>(g.varint);
          if (g.number == kAliasMust) alias.must_alias = g.varint != 0;
        }
        p.signature.aliases.push_back(alias);
        break;
      }
      case kHlo: p.hlo_module = f.payload; break;
      case kNeff: p.neff = f.payload; break;
      case kMadeBy: p.made_by = f.payload; break;
      default: break;
    }
  }
  if (p.neff.empty() || p.num_replicas < 1 || p.num_partitions < 1 ||
      p.cores.size() != static_cast<size_t>(p.num_replicas) * p.num_partitions) {
    return corrupt();
  }
  for (const hlo::OutputAlias& alias : p.signature.aliases) {
    if (alias.output < 0 || static_cast<size_t>(alias.output) >= p.signature.outputs.size() || alias.parameter < 0 ||
        static_cast<size_t>(alias.parameter) >= p.signature.parameters.size()) {
      return corrupt();
    }
  }
  return p;
}

}  // namespace pjrt_neuron::engine::neuron
