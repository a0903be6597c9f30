// SHA-256 against the FIPS 180-4 / NIST CAVP known-answer vectors, whole and fed in pieces.
#include "common/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace pjrt_neuron {
namespace {

std::string HexDigest(const std::string& message) {
  Sha256 hash;
  hash.Update(message);
  return Sha256::Hex(hash.Digest());
}

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(HexDigest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(HexDigest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage) {
  EXPECT_EQ(HexDigest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FourBlockMessage) {
  EXPECT_EQ(HexDigest("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(HexDigest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Padding edge cases: 55 bytes fit one block with the length, 56 need a second.
TEST(Sha256, PaddingBoundaries) {
  EXPECT_EQ(HexDigest(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(HexDigest(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(HexDigest(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, PiecewiseUpdatesEqualOneUpdate) {
  const std::string message(1000, 'x');
  for (size_t piece : {1, 7, 63, 64, 65, 500}) {
    Sha256 hash;
    for (size_t at = 0; at < message.size(); at += piece) hash.Update(message.substr(at, piece));
    EXPECT_EQ(Sha256::Hex(hash.Digest()), HexDigest(message)) << "pieces of " << piece;
  }
}

}  // namespace
}  // namespace pjrt_neuron
