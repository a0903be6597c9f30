// The XLA element types that may cross the NEFF boundary, with their PJRT types and sizes.
#ifndef NEURON_STANDIN_ELEMENT_TYPES_H_
#define NEURON_STANDIN_ELEMENT_TYPES_H_

#include <cstdint>

namespace standin {

struct ElementType {
  uint32_t xla_type;  // xla::PrimitiveType
  int pjrt_type;      // PJRT_Buffer_Type
  uint32_t byte_size;
  bool is_floating;
};

// Null for a type that is not allowed at the boundary.
const ElementType* FindElementType(uint32_t xla_type);

}  // namespace standin

#endif  // NEURON_STANDIN_ELEMENT_TYPES_H_
