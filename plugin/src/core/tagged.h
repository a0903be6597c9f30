// Objects handed out as opaque PJRT handles are recorded in a registry while they live, so a
// stale, foreign or mistyped handle is reported from the registry, without reading the memory
// it points at (which may be freed, or another object's).
//
// Limit: PJRT handles are the objects' addresses (callers keep arrays of them that we hand out,
// so there is no room for a generation), and a handle whose memory was reused for a new object
// of the same kind is taken for that new object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace pjrt_neuron::core {

namespace handles {
void Register(const void* object, uint32_t kind);
void Unregister(const void* object, uint32_t kind);
bool IsLive(const void* object, uint32_t kind);
// The index of the first of `objects` that is not a live `kind` (`count` when all are), checked
// under one hold of the registry.
size_t FirstNotLive(const void* const* objects, size_t count, uint32_t kind);
// A kind that `object` lives as (0 when none), and the PJRT type name of a kind.
uint32_t LiveKind(const void* object);
const char* KindName(uint32_t kind);
}  // namespace handles

template <uint32_t kTag>
class Tagged {
 public:
  static constexpr uint32_t kKind = kTag;
  Tagged() { handles::Register(this, kTag); }
  Tagged(const Tagged&) : Tagged() {}
  Tagged& operator=(const Tagged&) { return *this; }
  ~Tagged() { handles::Unregister(this, kTag); }
};

// The index of the first of `objects` that is not a live T (`count` when all are).
template <typename T>
size_t FirstNotLiveHandle(T* const* objects, size_t count) {
  // The registry holds the Tagged base's address; read as is, the list must hold the same.
  static_assert(std::is_standard_layout_v<T>, "the Tagged base must sit at the object's address");
  return handles::FirstNotLive(reinterpret_cast<const void* const*>(objects), count, T::kKind);
}

// True while `object` (possibly dangling) is a live object of its type. Only the pointer's
// value is used.
template <typename T>
bool IsLiveHandle(const T* object) {
  return object != nullptr && handles::IsLive(static_cast<const Tagged<T::kKind>*>(object), T::kKind);
}

}  // namespace pjrt_neuron::core
