// The type of a PJRT extension in an engine's chain, read as a plain integer: newer engine
// builds chain types this header's enum does not list, and loading one as the enum is undefined.
#pragma once

#include <cstddef>
#include <cstring>

#include "pjrt_c_api.h"

namespace pjrt_neuron {

inline bool IsExtensionOfType(const PJRT_Extension_Base* extension, PJRT_Extension_Type type) {
  int value = 0;
  static_assert(sizeof(PJRT_Extension_Type) == sizeof(int), "PJRT_Extension_Type is an int-sized enum");
  std::memcpy(&value, reinterpret_cast<const char*>(extension) + offsetof(PJRT_Extension_Base, type), sizeof(value));
  return value == static_cast<int>(type);
}

}  // namespace pjrt_neuron
