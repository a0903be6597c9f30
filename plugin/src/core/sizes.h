// Sizes of arrays in HBM, and byte counts as people read them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace pjrt_neuron::core {

// Dense size of an array: what a buffer of this shape takes in HBM (sub-byte types rounded up).
int64_t DenseSizeInBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims);
std::string FormatBytes(int64_t bytes);

}  // namespace pjrt_neuron::core
