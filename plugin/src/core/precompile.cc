// Graph collection and precompilation (precompile.h): the program record format, written and read here.
#include "core/precompile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/settings.h"
#include "common/sha256.h"
#include "core/compile_cache.h"
#include "core/client_options.h"
#include "core/topology.h"
#include "core/topology_compile.h"

namespace pjrt_neuron::core {
namespace {

constexpr char kRecordMagic[] = "pjrt-neuron-program/1\n";
constexpr size_t kRecordMagicSize = sizeof(kRecordMagic) - 1;

void PutString(std::string* out, const std::string& value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(static_cast<uint64_t>(value.size()) >> (8 * i)));
  *out += value;
}

bool GetString(const std::string& in, size_t* at, std::string* value) {
  if (in.size() < *at + 8) return false;
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i) size |= static_cast<uint64_t>(static_cast<unsigned char>(in[*at + i])) << (8 * i);
  *at += 8;
  if (in.size() - *at < size) return false;
  *value = in.substr(*at, size);
  *at += size;
  return true;
}

}  // namespace

std::string GraphCollectionDirectory() { return settings::Text(settings::Id::kGraphCollection); }

void RecordProgram(const std::string& directory, const Topology& topology, const engine::Program& program,
                   const std::string& options) {
  static const bool warned = [&] {
    std::fprintf(stderr,
                 "pjrt-neuron: GRAPH COLLECTION MODE (PJRT_NEURON_GRAPH_COLLECTION=%s): programs are recorded for "
                 "`pjrt-neuron precompile` and NOT run; every result of this run is meaningless\n",
                 directory.c_str());
    return true;
  }();
  (void)warned;
  std::string record(kRecordMagic, kRecordMagicSize);
  PutString(&record, topology.instance().name);
  PutString(&record, std::to_string(topology.shape().logical_nc_config));
  PutString(&record, program.format);
  PutString(&record, std::string(program.code, program.code_size));
  PutString(&record, options);
  Sha256 sha;
  sha.Update(record);
  mkdir(directory.c_str(), 0700);
  const std::string path = directory + "/" + Sha256::Hex(sha.Digest()) + ".program";
  const std::string temporary = path + ".tmp." + std::to_string(getpid());
  if (FILE* f = std::fopen(temporary.c_str(), "wb")) {
    bool ok = std::fwrite(record.data(), 1, record.size(), f) == record.size();
    ok = (std::fclose(f) == 0) && ok;
    if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) unlink(temporary.c_str());
  }
}

StatusOr<PrecompileResult> PrecompileRecord(const std::string& record_path) {
  std::string bytes;
  if (FILE* f = std::fopen(record_path.c_str(), "rb")) {
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) bytes.append(buffer, n);
    std::fclose(f);
  } else {
    return NotFound("cannot read " + record_path);
  }
  size_t at = kRecordMagicSize;
  std::string instance, lnc, format, code, options;
  if (bytes.compare(0, kRecordMagicSize, kRecordMagic) != 0 || !GetString(bytes, &at, &instance) ||
      !GetString(bytes, &at, &lnc) || !GetString(bytes, &at, &format) || !GetString(bytes, &at, &code) ||
      !GetString(bytes, &at, &options)) {
    return InvalidArgument(record_path + " is not a recorded program");
  }
  PN_ASSIGN_OR_RETURN(InstanceShape shape, ShapeInstance(instance, std::atoi(lnc.c_str())));
  Topology topology(shape);
  engine::Program program{format, code.data(), code.size()};
  PN_ASSIGN_OR_RETURN(ClientOptions settings, ResolveClientOptions({}, instance));
  PN_ASSIGN_OR_RETURN(CacheSettings cache_settings, ReadCacheSettings());
  if (!cache_settings.enabled) return FailedPrecondition("the compile cache is off (PJRT_NEURON_COMPILE_CACHE=0)");
  PN_ASSIGN_OR_RETURN(auto compiled, CompileForTopologyCached(topology, program, options,
                                                              settings.engine_library_path, cache_settings));
  return compiled ? PrecompileResult::kCompiled : PrecompileResult::kAlreadyCached;
}

}  // namespace pjrt_neuron::core
