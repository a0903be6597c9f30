// SHA-256 (FIPS 180-4): compile-cache keys and entry checksums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pjrt_neuron {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(const std::string& data) { Update(data.data(), data.size()); }
  std::string Digest();  // 32 raw bytes
  static std::string Hex(const std::string& bytes);

 private:
  void Block(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

}  // namespace pjrt_neuron
