#pragma once
// 16-bit floating-point storage types. Arithmetic happens in float: collectives reduce bf16 and
// f16 data in f32 and round back (to nearest, ties to even).

#include <cstdint>

namespace shardwise {

struct BFloat16 {
  std::uint16_t bits = 0;
  friend bool operator==(BFloat16, BFloat16) = default;
};

struct Float16 {
  std::uint16_t bits = 0;
  friend bool operator==(Float16, Float16) = default;
};

BFloat16 to_bfloat16(float value);
float to_float(BFloat16 value);
Float16 to_float16(float value);
float to_float(Float16 value);

}  // namespace shardwise
