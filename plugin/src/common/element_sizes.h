// Array element types by PJRT's and XLA's numbering, with their bits and names: the one table
// every layer reads element sizes from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pjrt_c_api.h"

namespace pjrt_neuron {

// Bits of one element; 0 for types that hold no array elements (invalid, token).
int ElementBits(PJRT_Buffer_Type type);

// Bytes of one element; 0 for sub-byte types and those ElementBits gives 0.
size_t WholeElementBytes(PJRT_Buffer_Type type);

bool IsFloat8(PJRT_Buffer_Type type);

// "f32", "bf16", ...; null for a number the table does not hold.
const char* ElementTypeName(PJRT_Buffer_Type type);

// PJRT's number for an xla.PrimitiveType; PJRT_Buffer_Type_INVALID for one PJRT has not.
PJRT_Buffer_Type ElementTypeOfXla(int primitive_type);

// Bytes of one element of an xla.PrimitiveType, sub-byte types rounded up to a byte; 0 for
// tuple, opaque and token, 1 for a number the table does not hold.
int64_t XlaElementBytes(int primitive_type);

}  // namespace pjrt_neuron
