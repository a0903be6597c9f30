// The registry of live handle objects (tagged.h): an open-addressing hash table of
// (address, kind), so registering, checking and unregistering a handle, done several times on
// every execution, allocate nothing and touch one or two cache lines.
#include <cstddef>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"
#include "core/tagged.h"

namespace pjrt_neuron::core::handles {
namespace {

struct Slot {
  const void* object = nullptr;  // nullptr: empty
  uint32_t kind = 0;             // with object == kTombstone: a removed entry
};
const void* const kTombstone = reinterpret_cast<const void*>(uintptr_t{1});

class Table {
 public:
  void Insert(const void* object, uint32_t kind) {
    if ((used_ + 1) * 2 > slots_.size()) Rehash(slots_.size() < 64 ? 128 : (live_ + 1) * 4);
    for (size_t i = Home(object);; i = Next(i)) {
      if (slots_[i].object == nullptr || slots_[i].object == kTombstone) {
        if (slots_[i].object == nullptr) ++used_;
        slots_[i] = Slot{object, kind};
        ++live_;
        return;
      }
    }
  }
  void Erase(const void* object, uint32_t kind) {
    if (slots_.empty()) return;
    for (size_t i = Home(object); slots_[i].object != nullptr; i = Next(i)) {
      if (slots_[i].object == object && slots_[i].kind == kind) {
        slots_[i].object = kTombstone;
        --live_;
        return;
      }
    }
  }
  // The first kind found at `object` (0: none), or whether `kind` is there when kind != 0.
  uint32_t Find(const void* object, uint32_t kind) const {
    if (slots_.empty() || object == nullptr || object == kTombstone) return 0;
    for (size_t i = Home(object); slots_[i].object != nullptr; i = Next(i)) {
      if (slots_[i].object == object && (kind == 0 || slots_[i].kind == kind)) return slots_[i].kind;
    }
    return 0;
  }

 private:
  size_t Home(const void* object) const {
    uint64_t h = reinterpret_cast<uintptr_t>(object) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h >> 32) & (slots_.size() - 1);
  }
  size_t Next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
  void Rehash(size_t at_least) {
    size_t capacity = 1;
    while (capacity < at_least) capacity <<= 1;
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    used_ = live_ = 0;
    for (const Slot& slot : old) {
      if (slot.object != nullptr && slot.object != kTombstone) Insert(slot.object, slot.kind);
    }
  }
  std::vector<Slot> slots_;  // a power of two long
  size_t used_ = 0;          // live entries and tombstones
  size_t live_ = 0;
};

// A spin lock, not std::mutex: taken several times per buffer on every execution.
SpinLock lock;
using Hold = std::lock_guard<SpinLock>;

Table& Live() {
  static auto* live = new Table();  // outlives static destructors
  return *live;
}

}  // namespace

void Register(const void* object, uint32_t kind) {
  Hold hold(lock);
  Live().Insert(object, kind);
}

void Unregister(const void* object, uint32_t kind) {
  Hold hold(lock);
  Live().Erase(object, kind);
}

bool IsLive(const void* object, uint32_t kind) {
  Hold hold(lock);
  return Live().Find(object, kind) != 0;
}

size_t FirstNotLive(const void* const* objects, size_t count, uint32_t kind) {
  Hold hold(lock);
  const Table& live = Live();
  for (size_t i = 0; i < count; ++i) {
    if (objects[i] == nullptr || live.Find(objects[i], kind) == 0) return i;
  }
  return count;
}

uint32_t LiveKind(const void* object) {
  Hold hold(lock);
  return Live().Find(object, 0);
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
