#pragma once
// The dtype a C++ element type stands for, so that a buffer's type names the dtype its
// collectives, messages and checkpoints carry: change a buffer's type and they follow, with no
// DType written beside it to forget.

#include <cstdint>
#include <type_traits>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise {

// float: f32, BFloat16: bf16, bool: bool, ...; a type without a dtype does not compile.
template <typename T>
constexpr DType dtype_of() {
  using E = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<E, float>)
    return DType::kF32;
  else if constexpr (std::is_same_v<E, double>)
    return DType::kF64;
  else if constexpr (std::is_same_v<E, BFloat16>)
    return DType::kBF16;
  else if constexpr (std::is_same_v<E, Float16>)
    return DType::kF16;
  else if constexpr (std::is_same_v<E, std::int32_t>)
    return DType::kI32;
  else if constexpr (std::is_same_v<E, std::int64_t>)
    return DType::kI64;
  else if constexpr (std::is_same_v<E, std::uint8_t>)
    return DType::kU8;
  else if constexpr (std::is_same_v<E, std::int8_t>)
    return DType::kI8;
  else if constexpr (std::is_same_v<E, bool>)
    return DType::kBool;
  else
    static_assert(sizeof(E) == 0, "no shardwise dtype for this element type");
}

// The dtype of the elements `buffer` points to: comm.all_reduce(p, p, n, element_type(p), ...).
template <typename T>
constexpr DType element_type(const T* /*buffer*/) {
  return dtype_of<T>();
}

}  // namespace shardwise
