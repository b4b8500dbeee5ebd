#pragma once
// Arithmetic on sizes that come from input: a product or sum that does not fit in 64 bits is
// an InvalidArgument saying what was being computed, never a silent wrap.

#include <cstdint>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"

namespace shardwise {

inline std::int64_t checked_multiply(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(a) + " x " +
                          std::to_string(b) + " does not fit in a 64-bit integer");
  }
  return result;
}

inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) {
    throw InvalidArgument(std::string(what) + ": " + std::to_string(a) + " + " +
                          std::to_string(b) + " does not fit in a 64-bit integer");
  }
  return result;
}

// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b.
constexpr std::int64_t ceil_divide(std::int64_t a, std::int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace shardwise
