#pragma once
// CRC-32C (Castagnoli), the checksum of TFRecord framing, and TFRecord's mask of it (a stored
// CRC of data that itself holds CRCs would otherwise be weak).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardwise::train::detail {

inline std::uint32_t crc32c(std::string_view data) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1U) != 0 ? (c >> 1) ^ 0x82F63B78U : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char byte : data) {
    crc = table[(crc ^ static_cast<unsigned char>(byte)) & 0xFFU] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFU;
}

inline std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

}  // namespace shardwise::train::detail
