#include "shardwise/strategy/precision.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

std::string to_string(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& text, const std::string& field) {
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    if (text == to_string(p)) return p;
  }
  throw InvalidArgument(field + " is '" + echo_input(text) + "'; expected fp32 or bf16");
}

DType parse_float_dtype(const std::string& text, const std::string& field) {
  if (text == "fp32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  throw InvalidArgument(field + " is '" + echo_input(text) +
                        "'; expected fp32 or bf16 (or float32, bfloat16)");
}

std::string float_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    default: break;
  }
  throw InvalidArgument("element type " + to_string(dtype) + " is not fp32 or bf16");
}

}  // namespace shardwise
