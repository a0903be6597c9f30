// How the PjrtNeuron_ helper exports hand text to Python: into the caller's buffer, cut to fit
// and NUL-terminated; the caller learns the whole length and calls again with room for it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

namespace pjrt_neuron::exports {

// Returns text.size(), the buffer needed being that plus one.
inline long CopyToCaller(const std::string& text, char* out, size_t out_size) {
  if (out != nullptr && out_size > 0) {
    const size_t n = std::min(text.size(), out_size - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<long>(text.size());
}

}  // namespace pjrt_neuron::exports
