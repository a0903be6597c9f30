// The XLA element types that may cross the NEFF boundary, with their PJRT types and sizes.
#include "element_types.h"

#include "pjrt_c_api.h"

namespace standin {
namespace {

constexpr ElementType kElementTypes[] = {
    {1, PJRT_Buffer_Type_PRED, 1, false},      {2, PJRT_Buffer_Type_S8, 1, false},
    {3, PJRT_Buffer_Type_S16, 2, false},       {4, PJRT_Buffer_Type_S32, 4, false},
    {5, PJRT_Buffer_Type_S64, 8, false},       {6, PJRT_Buffer_Type_U8, 1, false},
    {7, PJRT_Buffer_Type_U16, 2, false},       {8, PJRT_Buffer_Type_U32, 4, false},
    {9, PJRT_Buffer_Type_U64, 8, false},       {10, PJRT_Buffer_Type_F16, 2, true},
    {11, PJRT_Buffer_Type_F32, 4, true},       {16, PJRT_Buffer_Type_BF16, 2, true},
    {19, PJRT_Buffer_Type_F8E5M2, 1, true},    {20, PJRT_Buffer_Type_F8E4M3FN, 1, true},
};

}  // namespace

const ElementType* FindElementType(uint32_t xla_type) {
  for (const ElementType& type : kElementTypes) {
    if (type.xla_type == xla_type) return &type;
  }
  return nullptr;
}

}  // namespace standin
