// The element type table (element_sizes.h).
#include "common/element_sizes.h"

namespace pjrt_neuron {
namespace {

struct ElementType {
  PJRT_Buffer_Type pjrt;
  int xla;  // xla.PrimitiveType
  int bits;
  const char* name;
};

constexpr ElementType kElementTypes[] = {
    {PJRT_Buffer_Type_PRED, 1, 8, "pred"},
    {PJRT_Buffer_Type_S2, 26, 2, "s2"},
    {PJRT_Buffer_Type_S4, 21, 4, "s4"},
    {PJRT_Buffer_Type_S8, 2, 8, "s8"},
    {PJRT_Buffer_Type_S16, 3, 16, "s16"},
    {PJRT_Buffer_Type_S32, 4, 32, "s32"},
    {PJRT_Buffer_Type_S64, 5, 64, "s64"},
    {PJRT_Buffer_Type_U2, 27, 2, "u2"},
    {PJRT_Buffer_Type_U4, 22, 4, "u4"},
    {PJRT_Buffer_Type_U8, 6, 8, "u8"},
    {PJRT_Buffer_Type_U16, 7, 16, "u16"},
    {PJRT_Buffer_Type_U32, 8, 32, "u32"},
    {PJRT_Buffer_Type_U64, 9, 64, "u64"},
    {PJRT_Buffer_Type_F16, 10, 16, "f16"},
    {PJRT_Buffer_Type_F32, 11, 32, "f32"},
    {PJRT_Buffer_Type_F64, 12, 64, "f64"},
    {PJRT_Buffer_Type_BF16, 16, 16, "bf16"},
    {PJRT_Buffer_Type_C64, 15, 64, "c64"},
    {PJRT_Buffer_Type_C128, 18, 128, "c128"},
    {PJRT_Buffer_Type_F8E5M2, 19, 8, "f8e5m2"},
    {PJRT_Buffer_Type_F8E4M3FN, 20, 8, "f8e4m3fn"},
    {PJRT_Buffer_Type_F8E4M3B11FNUZ, 23, 8, "f8e4m3b11fnuz"},
    {PJRT_Buffer_Type_F8E5M2FNUZ, 24, 8, "f8e5m2fnuz"},
    {PJRT_Buffer_Type_F8E4M3FNUZ, 25, 8, "f8e4m3fnuz"},
    {PJRT_Buffer_Type_F8E4M3, 28, 8, "f8e4m3"},
    {PJRT_Buffer_Type_F8E3M4, 29, 8, "f8e3m4"},
    {PJRT_Buffer_Type_F8E8M0FNU, 33, 8, "f8e8m0fnu"},
    {PJRT_Buffer_Type_F4E2M1FN, 32, 4, "f4e2m1fn"},
    {PJRT_Buffer_Type_TOKEN, 17, 0, "token"},
};

// XLA's types that PJRT has no number for and that hold no elements of their own.
constexpr int kXlaTuple = 13;
constexpr int kXlaOpaque = 14;

const ElementType* Find(PJRT_Buffer_Type type) {
  for (const ElementType& entry : kElementTypes) {
    if (entry.pjrt == type) return &entry;
  }
  return nullptr;
}

const ElementType* FindXla(int primitive_type) {
  for (const ElementType& entry : kElementTypes) {
    if (entry.xla == primitive_type) return &entry;
  }
  return nullptr;
}

}  // namespace

int ElementBits(PJRT_Buffer_Type type) {
  const ElementType* entry = Find(type);
  return entry != nullptr ? entry->bits : 0;
}

size_t WholeElementBytes(PJRT_Buffer_Type type) {
  const int bits = ElementBits(type);
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 0;
}

bool IsFloat8(PJRT_Buffer_Type type) {
  const ElementType* entry = Find(type);
  return entry != nullptr && entry->name[0] == 'f' && entry->bits == 8;  // the f8* formats
}

const char* ElementTypeName(PJRT_Buffer_Type type) {
  const ElementType* entry = Find(type);
  return entry != nullptr ? entry->name : nullptr;
}

PJRT_Buffer_Type ElementTypeOfXla(int primitive_type) {
  const ElementType* entry = FindXla(primitive_type);
  return entry != nullptr ? entry->pjrt : PJRT_Buffer_Type_INVALID;
}

int64_t XlaElementBytes(int primitive_type) {
  if (primitive_type == kXlaTuple || primitive_type == kXlaOpaque) return 0;
  const ElementType* entry = FindXla(primitive_type);
  if (entry == nullptr) return 1;
  return (entry->bits + 7) / 8;
}

}  // namespace pjrt_neuron
