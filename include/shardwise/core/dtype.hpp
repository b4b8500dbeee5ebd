#pragma once
// Element types of arrays and parameters.

#include <cstddef>
#include <string>
#include <string_view>

namespace shardwise {

enum class DType { kF32, kF64, kBF16, kF16, kI32, kI64, kU8, kI8, kBool };

// "f32", "f64", "bf16", "f16", "i32", "i64", "u8", "i8", "bool".
std::string to_string(DType dtype);
// Accepts the short names and the NumPy / PyTorch spellings ("float32", "bfloat16", "int64",
// "uint8", "torch.float16"...). Throws ParseError naming the text otherwise.
DType parse_dtype(std::string_view text);
std::size_t size_in_bytes(DType dtype);
// f32, f64, bf16 and f16.
bool is_floating(DType dtype);

}  // namespace shardwise
