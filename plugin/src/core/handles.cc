// The registry of live handle objects (tagged.h).
#include <map>
#include <mutex>

#include "core/tagged.h"

namespace pjrt_neuron::core::handles {
namespace {

std::mutex mutex;
// One address may hold several kinds at once: an object and its first member.
std::multimap<const void*, uint32_t>& Live() {
  static auto* live = new std::multimap<const void*, uint32_t>();  // outlives static destructors
  return *live;
}

}  // namespace

void Register(const void* object, uint32_t kind) {
  std::lock_guard<std::mutex> lock(mutex);
  Live().emplace(object, kind);
}

void Unregister(const void* object, uint32_t kind) {
  std::lock_guard<std::mutex> lock(mutex);
  auto [first, last] = Live().equal_range(object);
  for (auto it = first; it != last; ++it) {
    if (it->second == kind) {
      Live().erase(it);
      return;
    }
  }
}

bool IsLive(const void* object, uint32_t kind) {
  std::lock_guard<std::mutex> lock(mutex);
  auto [first, last] = Live().equal_range(object);
  for (auto it = first; it != last; ++it) {
    if (it->second == kind) return true;
  }
  return false;
}

uint32_t LiveKind(const void* object) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = Live().find(object);
  return it == Live().end() ? 0 : it->second;
}

const char* KindName(uint32_t kind) {
  switch (kind) {
    case 0x4e434c49: return "PJRT_Client";
    case 0x4e444453: return "PJRT_DeviceDescription";
    case 0x4e544f50: return "PJRT_TopologyDescription";
    case 0x4e4d454d: return "PJRT_Memory";
    case 0x4e444556: return "PJRT_Device";
    case 0x4e455654: return "PJRT_Event";
    case 0x4e425546: return "PJRT_Buffer";
    case 0x4e455845: return "PJRT_Executable";
    case 0x4e4c4558: return "PJRT_LoadedExecutable";
    default: return "handle";
  }
}

}  // namespace pjrt_neuron::core::handles
