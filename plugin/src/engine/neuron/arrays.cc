// Element types, dense sizes and host layouts of the Neuron engine's arrays (arrays.h).
#include "engine/neuron/arrays.h"

#include <cstring>
#include <limits>

#include "common/element_sizes.h"

namespace pjrt_neuron::engine::neuron {

// The types a NeuronCore array holds are the whole-byte ones.
size_t ElementBytes(PJRT_Buffer_Type type) { return WholeElementBytes(type); }

std::string TypeName(PJRT_Buffer_Type type) {
  if (ElementBytes(type) != 0) return ElementTypeName(type);
  return "type" + std::to_string(static_cast<int>(type));
}

StatusOr<PJRT_Buffer_Type> FromXlaType(int primitive_type) {
  const PJRT_Buffer_Type type = ElementTypeOfXla(primitive_type);
  if (ElementBytes(type) != 0) return type;
  return Unimplemented("element type " + std::to_string(primitive_type) +
                       " (xla.PrimitiveType) is not one the Neuron engine stores (sub-byte types, tokens)");
}

StatusOr<size_t> DenseBytes(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  const size_t element = ElementBytes(type);
  if (element == 0) return InvalidArgument("element type " + TypeName(type) + " cannot be stored on a NeuronCore");
  size_t total = element;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("dimension " + std::to_string(d) + " is negative");
    if (d != 0 && total > std::numeric_limits<size_t>::max() / static_cast<size_t>(d)) {
      return InvalidArgument("an array of " + ShapeText(type, dims) + " is too large");
    }
    total *= static_cast<size_t>(d);
  }
  return total;
}

std::string ShapeText(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  std::string text = TypeName(type) + "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i == 0 ? "" : ",") + std::to_string(dims[i]);
  return text + "]";
}

Status CheckDenseLayout(const PJRT_Buffer_MemoryLayout* layout, size_t rank, const char* what) {
  if (layout == nullptr) return Status::Ok();
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Tiled) {
    const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout->tiled;
    bool dense = tiled.num_tiles == 0 && (tiled.minor_to_major_size == 0 || tiled.minor_to_major_size == rank);
    for (size_t i = 0; dense && i < tiled.minor_to_major_size; ++i) {
      dense = tiled.minor_to_major != nullptr && tiled.minor_to_major[i] == static_cast<int64_t>(rank - 1 - i);
    }
    if (dense) return Status::Ok();
  }
  return Unimplemented(std::string(what) +
                       ": the Neuron engine keeps arrays dense major-to-minor; other layouts are not implemented");
}

bool IsDenseStrides(const int64_t* byte_strides, size_t num_strides, const std::vector<int64_t>& dims,
                    size_t element_bytes) {
  if (byte_strides == nullptr) return true;
  if (num_strides != dims.size()) return false;
  int64_t expected = static_cast<int64_t>(element_bytes);
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] > 1 && byte_strides[i] != expected) return false;
    expected *= dims[i];
  }
  return true;
}

void GatherStrided(const void* src, const std::vector<int64_t>& dims, const int64_t* byte_strides,
                   size_t element_bytes, void* dst) {
  const size_t rank = dims.size();
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  std::vector<int64_t> index(rank, 0);
  const char* base = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  while (true) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i) offset += index[i] * byte_strides[i];
    std::memcpy(out, base + offset, element_bytes);
    out += element_bytes;
    size_t axis = rank;
    while (axis-- > 0) {
      if (++index[axis] < dims[axis]) break;
      index[axis] = 0;
    }
    if (axis == static_cast<size_t>(-1)) return;
  }
}

}  // namespace pjrt_neuron::engine::neuron
