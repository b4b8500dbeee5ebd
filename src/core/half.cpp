#include "shardwise/core/half.hpp"

#include <cmath>
#include <cstring>

namespace shardwise {
namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

BFloat16 to_bfloat16(float value) {
  const std::uint32_t bits = bits_of(value);
  if (std::isnan(value)) return {static_cast<std::uint16_t>((bits >> 16) | 0x40U)};  // quiet NaN
  const std::uint32_t rounding = 0x7FFFU + ((bits >> 16) & 1U);
  return {static_cast<std::uint16_t>((bits + rounding) >> 16)};
}

float to_float(BFloat16 value) { return float_of(static_cast<std::uint32_t>(value.bits) << 16); }

Float16 to_float16(float value) {
  const std::uint32_t bits = bits_of(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000U);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFU;
  if (magnitude >= 0x7F800000U) {  // inf or NaN
    return {static_cast<std::uint16_t>(sign | 0x7C00U | (magnitude > 0x7F800000U ? 0x200U : 0U))};
  }
  if (magnitude >= 0x477FF000U) return {static_cast<std::uint16_t>(sign | 0x7C00U)};  // overflow
  if (magnitude < 0x38800000U) {
    // Subnormal or zero in f16: scale so the integer part is the f16 mantissa, round to even.
    const float scaled = float_of(magnitude) * 16777216.0F;  // 2^24
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)))};
  }
  const std::uint32_t rounded = magnitude + 0xFFFU + ((magnitude >> 13) & 1U);
  return {static_cast<std::uint16_t>(sign | ((rounded - 0x38000000U) >> 13))};
}

float to_float(Float16 value) {
  const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000U) << 16;
  const std::uint32_t exponent = (value.bits >> 10) & 0x1FU;
  const std::uint32_t mantissa = value.bits & 0x3FFU;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) / 16777216.0F;  // mantissa * 2^-24
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return float_of(sign | 0x7F800000U | (mantissa << 13));
  return float_of(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

}  // namespace shardwise
