// The one element type table: each reader's view of it (core's HBM sizes, the engines' copies,
// the estimate's byte counts) as those readers counted before they shared it.
#include "common/element_sizes.h"

#include <gtest/gtest.h>

#include <string>

namespace pjrt_neuron {
namespace {

TEST(ElementSizes, BitsOfWholeAndSubByteTypes) {
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_PRED), 8);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_BF16), 16);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_F32), 32);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_C64), 64);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_C128), 128);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_S2), 2);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_U4), 4);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_F4E2M1FN), 4);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_F8E8M0FNU), 8);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_TOKEN), 0);
  EXPECT_EQ(ElementBits(PJRT_Buffer_Type_INVALID), 0);
}

TEST(ElementSizes, WholeBytesAreZeroForSubByteTypes) {
  EXPECT_EQ(WholeElementBytes(PJRT_Buffer_Type_F64), 8u);
  EXPECT_EQ(WholeElementBytes(PJRT_Buffer_Type_F8E4M3FN), 1u);
  EXPECT_EQ(WholeElementBytes(PJRT_Buffer_Type_S4), 0u);
  EXPECT_EQ(WholeElementBytes(PJRT_Buffer_Type_TOKEN), 0u);
}

TEST(ElementSizes, Float8TypesAreTheEightBitFloats) {
  EXPECT_TRUE(IsFloat8(PJRT_Buffer_Type_F8E5M2));
  EXPECT_TRUE(IsFloat8(PJRT_Buffer_Type_F8E8M0FNU));
  EXPECT_FALSE(IsFloat8(PJRT_Buffer_Type_F16));
  EXPECT_FALSE(IsFloat8(PJRT_Buffer_Type_F4E2M1FN));
  EXPECT_FALSE(IsFloat8(PJRT_Buffer_Type_PRED));
  EXPECT_FALSE(IsFloat8(PJRT_Buffer_Type_U8));
}

TEST(ElementSizes, NamesAndXlaNumbers) {
  EXPECT_EQ(std::string(ElementTypeName(PJRT_Buffer_Type_BF16)), "bf16");
  EXPECT_EQ(ElementTypeName(static_cast<PJRT_Buffer_Type>(999)), nullptr);
  EXPECT_EQ(ElementTypeOfXla(11), PJRT_Buffer_Type_F32);
  EXPECT_EQ(ElementTypeOfXla(16), PJRT_Buffer_Type_BF16);
  EXPECT_EQ(ElementTypeOfXla(33), PJRT_Buffer_Type_F8E8M0FNU);
  EXPECT_EQ(ElementTypeOfXla(13), PJRT_Buffer_Type_INVALID);  // tuple
}

TEST(ElementSizes, XlaBytesRoundSubByteTypesUpAndCountNoneForTuples) {
  EXPECT_EQ(XlaElementBytes(5), 8);    // S64
  EXPECT_EQ(XlaElementBytes(18), 16);  // C128
  EXPECT_EQ(XlaElementBytes(16), 2);   // BF16
  EXPECT_EQ(XlaElementBytes(21), 1);   // S4
  EXPECT_EQ(XlaElementBytes(13), 0);   // tuple
  EXPECT_EQ(XlaElementBytes(14), 0);   // opaque
  EXPECT_EQ(XlaElementBytes(17), 0);   // token
  EXPECT_EQ(XlaElementBytes(30), 1);   // S1: not in the table
}

}  // namespace
}  // namespace pjrt_neuron
