// Array sizes in HBM and byte counts for messages.
#include "core/sizes.h"

#include <cstdio>

#include "core/instance.h"

namespace pjrt_neuron::core {
namespace {

int ElementBits(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_S2: case PJRT_Buffer_Type_U2: return 2;
    case PJRT_Buffer_Type_S4: case PJRT_Buffer_Type_U4: case PJRT_Buffer_Type_F4E2M1FN: return 4;
    case PJRT_Buffer_Type_S16: case PJRT_Buffer_Type_U16: case PJRT_Buffer_Type_F16: case PJRT_Buffer_Type_BF16:
      return 16;
    case PJRT_Buffer_Type_S32: case PJRT_Buffer_Type_U32: case PJRT_Buffer_Type_F32: return 32;
    case PJRT_Buffer_Type_S64: case PJRT_Buffer_Type_U64: case PJRT_Buffer_Type_F64: case PJRT_Buffer_Type_C64:
      return 64;
    case PJRT_Buffer_Type_C128: return 128;
    default: return 8;  // pred, 8-bit integers and every fp8 type
  }
}

}  // namespace

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
  return (elements * ElementBits(type) + 7) / 8;
}

}  // namespace pjrt_neuron::core
