#pragma once
// A float's bf16 rounding as bits, inline for the loops that round as they copy (the products'
// operands, attention's packed tiles): to nearest, ties to even, a NaN kept a quiet NaN. The
// same rounding as shardwise::to_bfloat16 (tests/kernels/bf16_matmul_test.cpp holds them equal).

#include <cstdint>
#include <cstring>

namespace shardwise::kernels::detail {

[[gnu::always_inline]] inline std::uint16_t bf16_bits(std::uint32_t float_bits) {
  const std::uint32_t rounded = (float_bits + 0x7FFFU + ((float_bits >> 16) & 1U)) >> 16;
  const std::uint32_t quiet_nan = (float_bits >> 16) | 0x40U;
  return static_cast<std::uint16_t>((float_bits & 0x7FFFFFFFU) > 0x7F800000U ? quiet_nan : rounded);
}

[[gnu::always_inline]] inline std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bf16_bits(bits);
}

// A bf16 value widened to float (exact).
[[gnu::always_inline]] inline float widened(std::uint16_t bits) {
  const std::uint32_t float_bits = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0F;
  std::memcpy(&value, &float_bits, sizeof value);
  return value;
}

}  // namespace shardwise::kernels::detail
