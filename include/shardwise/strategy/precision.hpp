#pragma once
// The precision a model computes in: one enum for the trainer's models, which run it, and for
// the command's and the library's settings. kFp32 computes everything in float32. kBf16 is
// mixed precision as PyTorch's autocast and Megatron-LM's --bf16 run it: float32 master
// parameters, gradients and AdamW moments; the matrix products read bf16 copies of their weights
// and bf16 roundings of their inputs and accumulate in float32 (docs/precision.md).

#include <string>

#include "shardwise/core/dtype.hpp"

namespace shardwise {

enum class Precision { kFp32, kBf16 };

// "fp32", "bf16".
[[nodiscard]] std::string to_string(Precision precision);
// The inverse; InvalidArgument naming `field` and the text for anything else.
[[nodiscard]] Precision parse_precision(const std::string& text, const std::string& field);

// A floating-point element type a setting names: "fp32" or "bf16" ("float32", "bfloat16" too),
// as what gradients are reduced in (Megatron-LM's --grad-reduce-in-bf16, FSDP2's reduce_dtype)
// or what an export writes; InvalidArgument naming `field` and the text for anything else.
[[nodiscard]] DType parse_float_dtype(const std::string& text, const std::string& field);
// "fp32", "bf16".
[[nodiscard]] std::string float_dtype_name(DType dtype);

}  // namespace shardwise
