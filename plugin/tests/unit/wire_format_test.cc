// The protobuf wire format reader and writer of hlo/wire_format.h, against byte strings
// written out by hand from the encoding rules.
#include "hlo/wire_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace pjrt_neuron::hlo {
namespace {

// WireReader keeps pointers into its bytes, so every test names them before reading.
std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

const std::vector<std::pair<uint64_t, std::string>>& VarintCases() {
  static const auto* cases = new std::vector<std::pair<uint64_t, std::string>>{
      {0, Bytes({0x00})},
      {1, Bytes({0x01})},
      {127, Bytes({0x7f})},
      {128, Bytes({0x80, 0x01})},
      {300, Bytes({0xac, 0x02})},
      {uint64_t{1} << 32, Bytes({0x80, 0x80, 0x80, 0x80, 0x10})},
      {uint64_t{1} << 63, Bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})},
      {std::numeric_limits<uint64_t>::max(), Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})},
  };
  return *cases;
}

TEST(WireReader, ReadsVarints) {
  for (const auto& [value, bytes] : VarintCases()) {
    WireReader reader(bytes);
    uint64_t read = 12345;
    ASSERT_TRUE(reader.Varint(&read)) << value;
    EXPECT_EQ(read, value);
    EXPECT_TRUE(reader.done()) << value;
  }
}

TEST(WireReader, NegativeInt64IsTenBytes) {
  // int64 -1, as XLA writes device_ordinal = -1: two's complement, ten bytes.
  const std::string reader_bytes = Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  WireReader reader(reader_bytes);
  uint64_t read;
  ASSERT_TRUE(reader.Varint(&read));
  EXPECT_EQ(static_cast<int64_t>(read), -1);
}

TEST(WireReader, TruncatedVarintFails) {
  for (const std::string& bytes : {std::string(), Bytes({0x80}), Bytes({0xff, 0xff}), Bytes({0x80, 0x80, 0x80})}) {
    WireReader reader(bytes);
    uint64_t read;
    EXPECT_FALSE(reader.Varint(&read)) << bytes.size() << " bytes";
  }
}

TEST(WireReader, OverlongVarintFails) {
  // Eleven bytes, every one saying another follows: more than a 64-bit varint can have.
  std::string bytes(10, static_cast<char>(0x80));
  bytes.push_back(0x01);
  WireReader reader(bytes);
  uint64_t read;
  EXPECT_FALSE(reader.Varint(&read));
}

TEST(WireReader, ReadsEveryWireType) {
  const std::string bytes = Bytes({0x08, 0x96, 0x01,                                            // 1: varint 150
                                   0x11, 1, 2, 3, 4, 5, 6, 7, 8,                                // 2: fixed64
                                   0x1a, 0x03, 'a', 'b', 'c',                                   // 3: "abc"
                                   0x25, 9, 8, 7, 6});                                          // 4: fixed32
  WireReader reader(bytes);
  Field f;
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 1u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kVarint));
  EXPECT_EQ(f.varint, 150u);
  EXPECT_EQ(f.raw, bytes.substr(0, 3));
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 2u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kFixed64));
  EXPECT_EQ(f.raw, bytes.substr(3, 9));
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 3u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kLengthDelimited));
  EXPECT_EQ(f.payload, "abc");
  EXPECT_EQ(f.raw, bytes.substr(12, 5));
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 4u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kFixed32));
  EXPECT_EQ(f.raw, bytes.substr(17, 5));
  EXPECT_TRUE(reader.done());
}

TEST(WireReader, GroupAndReservedWireTypesFail) {
  // 3 and 4 are the deprecated groups, 6 and 7 are not defined; none appears in XLA's protos.
  for (int wire_type : {3, 4, 6, 7}) {
    const std::string reader_bytes = Bytes({(1 << 3) | wire_type, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
    WireReader reader(reader_bytes);
    Field f;
    EXPECT_FALSE(reader.Next(&f)) << "wire type " << wire_type;
  }
}

TEST(WireReader, LengthPastTheEndFails) {
  Field f;
  const std::string short_payload_bytes = Bytes({0x0a, 0x05, 'a', 'b', 'c'});
  WireReader short_payload(short_payload_bytes);
  EXPECT_FALSE(short_payload.Next(&f));
  EXPECT_TRUE(f.payload.empty());
  // A length near 2^64 must not wrap the end pointer around.
  const std::string huge_bytes = Bytes({0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'});
  WireReader huge(huge_bytes);
  EXPECT_FALSE(huge.Next(&f));
  const std::string missing_length_bytes = Bytes({0x0a});
  WireReader missing_length(missing_length_bytes);
  EXPECT_FALSE(missing_length.Next(&f));
}

TEST(WireReader, TruncatedFixedFieldsFail) {
  Field f;
  const std::string fixed64_bytes = Bytes({0x09, 1, 2, 3, 4, 5, 6, 7});
  WireReader fixed64(fixed64_bytes);
  EXPECT_FALSE(fixed64.Next(&f));
  const std::string fixed32_bytes = Bytes({0x0d, 1, 2, 3});
  WireReader fixed32(fixed32_bytes);
  EXPECT_FALSE(fixed32.Next(&f));
  const std::string varint_value_bytes = Bytes({0x08, 0x80});
  WireReader varint_value(varint_value_bytes);
  EXPECT_FALSE(varint_value.Next(&f));
}

TEST(WireReader, EmptyLengthDelimitedField) {
  const std::string reader_bytes = Bytes({0x12, 0x00});
  WireReader reader(reader_bytes);
  Field f;
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 2u);
  EXPECT_EQ(f.payload, "");
  EXPECT_TRUE(reader.done());
}

TEST(WireReader, LargeFieldNumbers) {
  // 87 (collective_device_list) needs a two-byte tag; 2^29 - 1 is the largest field number.
  std::string bytes = Bytes({0xba, 0x05, 0x01, 'x'});
  AppendVarintField(&bytes, (1u << 29) - 1, 5);
  WireReader reader(bytes);
  Field f;
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 87u);
  EXPECT_EQ(f.payload, "x");
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, (1u << 29) - 1);
  EXPECT_EQ(f.varint, 5u);
  EXPECT_TRUE(reader.done());
}

TEST(WireReader, RawFieldsConcatenateToTheMessage) {
  std::string message;
  AppendVarintField(&message, 1, 7);
  AppendBytesField(&message, 2, std::string(300, 'p'));
  message += Bytes({0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4});
  AppendVarintField(&message, 5, std::numeric_limits<uint64_t>::max());
  std::string copied;
  WireReader reader(message);
  Field f;
  int fields = 0;
  while (!reader.done()) {
    ASSERT_TRUE(reader.Next(&f));
    copied += f.raw;
    ++fields;
  }
  EXPECT_EQ(fields, 5);
  EXPECT_EQ(copied, message);
}

TEST(WireReader, PayloadIsANestedMessage) {
  std::string inner;
  AppendVarintField(&inner, 4, 42);
  std::string outer;
  AppendBytesField(&outer, 3, inner);
  WireReader reader(outer);
  Field f;
  ASSERT_TRUE(reader.Next(&f));
  WireReader nested(f.payload);
  Field g;
  ASSERT_TRUE(nested.Next(&g));
  EXPECT_EQ(g.number, 4u);
  EXPECT_EQ(g.varint, 42u);
  EXPECT_TRUE(nested.done());
}

TEST(AppendVarint, WritesTheCanonicalEncoding) {
  for (const auto& [value, bytes] : VarintCases()) {
    std::string out;
    AppendVarint(&out, value);
    EXPECT_EQ(out, bytes) << value;
  }
}

TEST(AppendVarint, RoundTripsThroughTheReader) {
  std::string out;
  std::vector<uint64_t> values;
  for (int shift = 0; shift < 64; ++shift) {
    values.push_back(uint64_t{1} << shift);
    values.push_back((uint64_t{1} << shift) - 1);
  }
  values.push_back(std::numeric_limits<uint64_t>::max());
  for (uint64_t v : values) AppendVarint(&out, v);
  WireReader reader(out);
  for (uint64_t v : values) {
    uint64_t read;
    ASSERT_TRUE(reader.Varint(&read));
    EXPECT_EQ(read, v);
  }
  EXPECT_TRUE(reader.done());
}

TEST(AppendFields, RoundTripThroughTheReader) {
  std::string out;
  AppendVarintField(&out, 4, 2);
  AppendBytesField(&out, 9, "");
  AppendBytesField(&out, 3, std::string(200, 'z'));  // a two-byte length
  AppendVarintField(&out, 26, uint64_t{1} << 40);
  WireReader reader(out);
  Field f;
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 4u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kVarint));
  EXPECT_EQ(f.varint, 2u);
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 9u);
  EXPECT_EQ(f.wire_type, static_cast<uint32_t>(kLengthDelimited));
  EXPECT_EQ(f.payload, "");
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 3u);
  EXPECT_EQ(f.payload, std::string(200, 'z'));
  ASSERT_TRUE(reader.Next(&f));
  EXPECT_EQ(f.number, 26u);
  EXPECT_EQ(f.varint, uint64_t{1} << 40);
  EXPECT_TRUE(reader.done());
}

TEST(AppendFields, BytesFieldIsTagLengthPayload) {
  std::string out;
  AppendBytesField(&out, 1, "hi");
  EXPECT_EQ(out, Bytes({0x0a, 0x02, 'h', 'i'}));
  out.clear();
  AppendVarintField(&out, 35, 3);
  EXPECT_EQ(out, Bytes({0x98, 0x02, 0x03}));  // HloInstructionProto.id = 3, as XLA writes it
}

}  // namespace
}  // namespace pjrt_neuron::hlo
