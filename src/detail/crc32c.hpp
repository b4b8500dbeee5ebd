#pragma once
// CRC-32C (Castagnoli): the checksum of TFRecord framing (run logs) and of checkpoint chunks.
// Computed with the CPU's crc32 instruction where it has one (SSE 4.2, chosen at run time),
// else eight bytes at a time from tables; both give the same values.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardwise::detail {

// The CRC of `size` bytes continuing from `crc` (0 to start: crc32c(b, crc32c(a)) is the CRC of
// a then b).
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);

inline std::uint32_t crc32c(std::string_view data) { return crc32c(data.data(), data.size()); }

// TFRecord's mask of a CRC: a stored CRC of data that itself holds CRCs would otherwise be weak.
inline std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

}  // namespace shardwise::detail
