// Objects handed out as opaque PJRT handles carry a tag, so a stale or mistyped handle is
// reported instead of dereferenced blindly.
#pragma once

#include <cstdint>

namespace pjrt_neuron::core {

template <uint32_t kTag>
class Tagged {
 public:
  Tagged() : tag_(kTag) {}
  ~Tagged() { tag_ = 0; }
  bool valid() const { return tag_ == kTag; }

 private:
  volatile uint32_t tag_;
};

}  // namespace pjrt_neuron::core
