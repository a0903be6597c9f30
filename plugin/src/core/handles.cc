// The registry of live handle objects (tagged.h): an open-addressing hash table of
// (address, kind), so registering, checking and unregistering a handle, done several times on
// every execution, allocate nothing and touch one or two cache lines.
//
// Checks outnumber changes several to one (every entry point checks its handles), so checks
// take no lock: the table is a sequence lock. Writers (one at a time, under a spin lock) make the
// sequence odd while they change slots; a reader that saw it odd, or changed, reads again.
// Slot arrays replaced by a larger one are kept, never freed, since a reader may still be
// probing one; the table only grows, so they add up to less than the current array.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"
#include "core/tagged.h"

namespace pjrt_neuron::core::handles {
namespace {

const void* const kTombstone = reinterpret_cast<const void*>(uintptr_t{1});

struct Slot {
  std::atomic<const void*> object{nullptr};  // nullptr: empty; kTombstone: a removed entry
  std::atomic<uint32_t> kind{0};
};

struct SlotArray {
  explicit SlotArray(size_t n) : capacity(n), slots(new Slot[n]) {}
  size_t capacity;  // a power of two
  std::unique_ptr<Slot[]> slots;
};

size_t Home(const void* object, size_t capacity) {
  uint64_t h = reinterpret_cast<uintptr_t>(object) * 0x9e3779b97f4a7c15ull;
  return static_cast<size_t>(h >> 32) & (capacity - 1);
}

// The first kind found at `object` (0: none), or whether `kind` is there when kind != 0.
// Bounded by the capacity, so a read torn by a writer still ends (and is then read again).
uint32_t Probe(const SlotArray& array, const void* object, uint32_t kind) {
  const size_t mask = array.capacity - 1;
  for (size_t i = Home(object, array.capacity), n = 0; n < array.capacity; i = (i + 1) & mask, ++n) {
    const void* here = array.slots[i].object.load(std::memory_order_relaxed);
    if (here == nullptr) return 0;
    if (here != object) continue;
    uint32_t here_kind = array.slots[i].kind.load(std::memory_order_relaxed);
    if (kind == 0 || here_kind == kind) return here_kind;
  }
  return 0;
}

class Table {
 public:
  // Writers hold this (Hold) around Insert and Erase.
  SpinLock& writer_lock() { return writer_lock_; }

  void Insert(const void* object, uint32_t kind) {
    SlotArray* array = current_.load(std::memory_order_relaxed);
    if (array == nullptr || (used_ + 1) * 2 > array->capacity) {
      Rebuild(array == nullptr ? 128 : std::max<size_t>(128, (live_ + 1) * 4));
      array = current_.load(std::memory_order_relaxed);
    }
    const size_t mask = array->capacity - 1;
    for (size_t i = Home(object, array->capacity);; i = (i + 1) & mask) {
      const void* here = array->slots[i].object.load(std::memory_order_relaxed);
      if (here == nullptr || here == kTombstone) {
        if (here == nullptr) ++used_;
        BeginWrite();
        array->slots[i].kind.store(kind, std::memory_order_relaxed);
        array->slots[i].object.store(object, std::memory_order_relaxed);
        EndWrite();
        ++live_;
        return;
      }
    }
  }

  void Erase(const void* object, uint32_t kind) {
    SlotArray* array = current_.load(std::memory_order_relaxed);
    if (array == nullptr) return;
    const size_t mask = array->capacity - 1;
    for (size_t i = Home(object, array->capacity);; i = (i + 1) & mask) {
      const void* here = array->slots[i].object.load(std::memory_order_relaxed);
      if (here == nullptr) return;
      if (here == object && array->slots[i].kind.load(std::memory_order_relaxed) == kind) {
        BeginWrite();
        array->slots[i].object.store(kTombstone, std::memory_order_relaxed);
        EndWrite();
        --live_;
        return;
      }
    }
  }

  // Without the writer lock: retried while a writer is at work.
  uint32_t Find(const void* object, uint32_t kind) const {
    if (object == nullptr || object == kTombstone) return 0;
    for (int spins = 0;; ++spins) {
      const uint64_t before = sequence_.load(std::memory_order_acquire);
      if ((before & 1) == 0) {
        const SlotArray* array = current_.load(std::memory_order_acquire);
        const uint32_t found = array == nullptr ? 0 : Probe(*array, object, kind);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (sequence_.load(std::memory_order_relaxed) == before) return found;
      }
      if (spins > 100) sched_yield();
    }
  }

 private:
  void BeginWrite() {
    sequence_.store(sequence_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  void EndWrite() { sequence_.store(sequence_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Leaves the live entries, without tombstones, in an array of at least `at_least` slots: the
  // current one when it is as large (in place), else a new one (the old one is kept).
  void Rebuild(size_t at_least) {
    size_t capacity = 1;
    while (capacity < at_least) capacity <<= 1;
    SlotArray* old = current_.load(std::memory_order_relaxed);
    std::vector<std::pair<const void*, uint32_t>> entries;
    if (old != nullptr) {
      for (size_t i = 0; i < old->capacity; ++i) {
        const void* object = old->slots[i].object.load(std::memory_order_relaxed);
        if (object != nullptr && object != kTombstone) {
          entries.emplace_back(object, old->slots[i].kind.load(std::memory_order_relaxed));
        }
      }
    }
    SlotArray* target = old;
    if (old == nullptr || capacity > old->capacity) {
      retired_.push_back(std::make_unique<SlotArray>(capacity));
      target = retired_.back().get();
    }
    BeginWrite();
    if (target == old) {
      for (size_t i = 0; i < target->capacity; ++i) target->slots[i].object.store(nullptr, std::memory_order_relaxed);
    }
    const size_t mask = target->capacity - 1;
    for (const auto& [object, kind] : entries) {
      size_t i = Home(object, target->capacity);
      while (target->slots[i].object.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask;
      target->slots[i].kind.store(kind, std::memory_order_relaxed);
      target->slots[i].object.store(object, std::memory_order_relaxed);
    }
    current_.store(target, std::memory_order_release);
    EndWrite();
    used_ = live_ = entries.size();
  }

  SpinLock writer_lock_;
  std::atomic<uint64_t> sequence_{0};  // odd while a writer changes slots
  std::atomic<SlotArray*> current_{nullptr};
  std::vector<std::unique_ptr<SlotArray>> retired_;  // every array made, the current one last
  size_t used_ = 0;  // live entries and tombstones
  size_t live_ = 0;
};

Table& Live() {
  static auto* live = new Table();  // outlives static destructors
  return *live;
}

using Hold = std::lock_guard<SpinLock>;

}  // namespace

void Register(const void* object, uint32_t kind) {
  Table& table = Live();
  Hold hold(table.writer_lock());
  table.Insert(object, kind);
}

void Unregister(const void* object, uint32_t kind) {
  Table& table = Live();
  Hold hold(table.writer_lock());
  table.Erase(object, kind);
}

bool IsLive(const void* object, uint32_t kind) { return Live().Find(object, kind) != 0; }

size_t FirstNotLive(const void* const* objects, size_t count, uint32_t kind) {
  const Table& table = Live();
  for (size_t i = 0; i < count; ++i) {
    if (objects[i] == nullptr || table.Find(objects[i], kind) == 0) return i;
  }
  return count;
}

uint32_t LiveKind(const void* object) { return Live().Find(object, 0); }

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
