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

// A float carried as two bf16 values, its rounding and the rounding of what is left of it:
// about 16 significant bits where one bf16 keeps 8. The remainder is zero where it is not finite
// (an infinity or NaN, or a value whose rounding overflowed), so that the two add up to the
// single rounding there. high + low is exact in float32: both are multiples of the value's last
// bit, and their sum is no larger than the value's magnitude rounded up.
struct Bf16Terms {
  std::uint16_t high = 0;
  std::uint16_t low = 0;
};

[[gnu::always_inline]] inline Bf16Terms bf16_terms(float value) {
  const std::uint16_t high = bf16_bits(value);
  const float remainder = value - widened(high);
  const bool finite = remainder - remainder == 0.0F;
  return {high, finite ? bf16_bits(remainder) : std::uint16_t{0}};
}

// The value both terms carry, as a float.
[[gnu::always_inline]] inline float two_term_rounding(float value) {
  const Bf16Terms terms = bf16_terms(value);
  return widened(terms.high) + widened(terms.low);
}

}  // namespace shardwise::kernels::detail
