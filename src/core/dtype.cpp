#include "shardwise/core/dtype.hpp"

#include <array>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t bytes;
  std::array<const char*, 2> aliases;
};

constexpr std::array<DTypeInfo, 9> kDTypes{{
    {DType::kF32, "f32", 4, {"float32", "float"}},
    {DType::kF64, "f64", 8, {"float64", "double"}},
    {DType::kBF16, "bf16", 2, {"bfloat16", "bfloat16"}},
    {DType::kF16, "f16", 2, {"float16", "half"}},
    {DType::kI32, "i32", 4, {"int32", "int"}},
    {DType::kI64, "i64", 8, {"int64", "long"}},
    {DType::kU8, "u8", 1, {"uint8", "byte"}},
    {DType::kI8, "i8", 1, {"int8", "char"}},
    {DType::kBool, "bool", 1, {"bool_", "boolean"}},
}};

const DTypeInfo& info(DType dtype) {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  return kDTypes[0];
}

}  // namespace

std::string to_string(DType dtype) { return info(dtype).name; }

std::size_t size_in_bytes(DType dtype) { return info(dtype).bytes; }

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kBF16 ||
         dtype == DType::kF16;
}

DType parse_dtype(std::string_view text) {
  std::string_view name = text;
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const DTypeInfo& entry : kDTypes) {
    if (name == entry.name || name == entry.aliases[0] || name == entry.aliases[1]) {
      return entry.dtype;
    }
  }
  throw ParseError("dtype '" + echo_input(text) +
                   "' is not one of f32, f64, bf16, f16, i32, i64, u8, i8, bool (or float32, "
                   "bfloat16, ...)");
}

}  // namespace shardwise
