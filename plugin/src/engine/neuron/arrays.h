// Arrays as the Neuron engine stores them: element types (PJRT's and XLA's numbering), dense
// sizes, and the host layouts a transfer may use (dense, or strided on the way in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "pjrt_c_api.h"

namespace pjrt_neuron::engine::neuron {

// Bytes per element; 0 for types a NeuronCore array cannot hold (sub-byte, token, invalid).
size_t ElementBytes(PJRT_Buffer_Type type);
std::string TypeName(PJRT_Buffer_Type type);

// PJRT's number for an xla.PrimitiveType; UNIMPLEMENTED for types the engine does not store.
StatusOr<PJRT_Buffer_Type> FromXlaType(int primitive_type);

// Dense size in bytes; INVALID_ARGUMENT for negative dims, overflow or unstorable types.
StatusOr<size_t> DenseBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims);

// "f32[2,3]" for messages.
std::string ShapeText(PJRT_Buffer_Type type, const std::vector<int64_t>& dims);

// OK when `layout` (null: the default) is dense major-to-minor; UNIMPLEMENTED otherwise.
Status CheckDenseLayout(const PJRT_Buffer_MemoryLayout* layout, size_t rank, const char* what);

// True when `byte_strides` (may be null) describe the dense major-to-minor layout.
bool IsDenseStrides(const int64_t* byte_strides, size_t num_strides, const std::vector<int64_t>& dims,
                    size_t element_bytes);

// Copies a strided host array into `dst`, dense major-to-minor.
void GatherStrided(const void* src, const std::vector<int64_t>& dims, const int64_t* byte_strides,
                   size_t element_bytes, void* dst);

}  // namespace pjrt_neuron::engine::neuron
