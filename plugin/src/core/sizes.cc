// Array sizes in HBM and byte counts for messages.
#include "core/sizes.h"

#include <cstdio>

#include "common/element_sizes.h"
#include "core/instance.h"

namespace pjrt_neuron::core {
std::string FormatBytes(int64_t bytes) {
  char text[64];
  if (bytes > 0 && bytes % kGiB == 0) {
    std::snprintf(text, sizeof(text), "%lld GiB", static_cast<long long>(bytes / kGiB));
  } else if (bytes >= kGiB) {
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / kGiB);
  } else if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

int64_t DenseSizeInBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  const int bits = ElementBits(type);
  return (elements * (bits > 0 ? bits : 8) + 7) / 8;  // token, invalid: a byte an element
}

}  // namespace pjrt_neuron::core
