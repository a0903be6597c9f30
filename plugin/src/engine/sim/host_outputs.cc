// The host-outputs trailer of serialized executables (host_outputs.h).
#include "engine/sim/host_outputs.h"

#include <cstdint>
#include <cstring>
#include <sstream>

namespace pjrt_neuron::engine::sim {
namespace {

constexpr char kHostOutputsMagic[] = "pjrt-neuron-host-outputs/1";

}  // namespace

std::string WithHostOutputs(std::string bytes, const std::vector<std::string>& kinds) {
  std::string list;
  for (const std::string& kind : kinds) list += (list.empty() ? "" : ",") + (kind.empty() ? "-" : kind);
  const uint32_t size = static_cast<uint32_t>(list.size());
  bytes += list;
  bytes.append(reinterpret_cast<const char*>(&size), sizeof size);
  bytes += kHostOutputsMagic;
  return bytes;
}

std::string SplitHostOutputs(const std::string& bytes, std::vector<std::string>* kinds) {
  const size_t magic = sizeof kHostOutputsMagic - 1;
  uint32_t size = 0;
  if (bytes.size() < magic + sizeof size || bytes.compare(bytes.size() - magic, magic, kHostOutputsMagic) != 0) {
    return bytes;
  }
  std::memcpy(&size, bytes.data() + bytes.size() - magic - sizeof size, sizeof size);
  if (size > bytes.size() - magic - sizeof size) return bytes;
  const size_t list_at = bytes.size() - magic - sizeof size - size;
  std::stringstream list(bytes.substr(list_at, size));
  for (std::string kind; std::getline(list, kind, ',');) kinds->push_back(kind == "-" ? "" : kind);
  return bytes.substr(0, list_at);
}

}  // namespace pjrt_neuron::engine::sim
