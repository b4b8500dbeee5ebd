#include <algorithm>
#include <cstdint>

#include "detail/reduce.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise::detail {
namespace {

// Storage type S, arithmetic type A.
template <typename S, typename A, typename Load, typename Store>
void reduce_typed(const std::vector<const void*>& inputs, void* out, std::size_t count, ReduceOp op,
                  Load load, Store store) {
  std::vector<const S*> in;
  in.reserve(inputs.size());
  for (const void* p : inputs) in.push_back(static_cast<const S*>(p));
  S* result = static_cast<S*>(out);
  const auto n = static_cast<A>(inputs.size());
  for (std::size_t e = 0; e < count; ++e) {
    A value = load(in[0][e]);
    for (std::size_t k = 1; k < in.size(); ++k) {
      const A next = load(in[k][e]);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: value = static_cast<A>(value + next); break;
        case ReduceOp::kMax: value = std::max(value, next); break;
        case ReduceOp::kMin: value = std::min(value, next); break;
      }
    }
    if (op == ReduceOp::kAvg) value = static_cast<A>(value / n);
    result[e] = store(value);
  }
}

// Native types reduce a whole input at a time (loops the compiler vectorises). Where `out` is
// one of the inputs, that input is taken first, so nothing is overwritten before it is read.
template <typename T, typename Op>
void reduce_passes(const std::vector<const void*>& inputs, T* out, std::size_t count, Op op) {
  std::size_t first = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k] == out) first = k;
  }
  const T* a = static_cast<const T*>(inputs[first]);
  std::size_t taken = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (k == first) continue;
    const T* b = static_cast<const T*>(inputs[k]);
    const T* acc = taken == 0 ? a : out;
    for (std::size_t e = 0; e < count; ++e) out[e] = op(acc[e], b[e]);
    ++taken;
  }
  if (taken == 0 && out != a) std::copy(a, a + count, out);
}

template <typename T>
void reduce_native(const std::vector<const void*>& inputs, void* out, std::size_t count,
                   ReduceOp op) {
  T* result = static_cast<T*>(out);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      reduce_passes<T>(inputs, result, count, [](T x, T y) { return static_cast<T>(x + y); });
      break;
    case ReduceOp::kMax:
      reduce_passes<T>(inputs, result, count, [](T x, T y) { return std::max(x, y); });
      break;
    case ReduceOp::kMin:
      reduce_passes<T>(inputs, result, count, [](T x, T y) { return std::min(x, y); });
      break;
  }
  if (op == ReduceOp::kAvg) {
    const auto n = static_cast<T>(inputs.size());
    for (std::size_t e = 0; e < count; ++e) result[e] = static_cast<T>(result[e] / n);
  }
}

}  // namespace

void reduce_into(const std::vector<const void*>& inputs, void* out, std::size_t count, DType dtype,
                 ReduceOp op) {
  if (inputs.empty() || count == 0) return;
  switch (dtype) {
    case DType::kF32: reduce_native<float>(inputs, out, count, op); break;
    case DType::kF64: reduce_native<double>(inputs, out, count, op); break;
    case DType::kI32: reduce_native<std::int32_t>(inputs, out, count, op); break;
    case DType::kI64: reduce_native<std::int64_t>(inputs, out, count, op); break;
    case DType::kU8: reduce_native<std::uint8_t>(inputs, out, count, op); break;
    case DType::kI8: reduce_native<std::int8_t>(inputs, out, count, op); break;
    case DType::kBool:
      // Logical or for sum and max, and for min (avg is refused before any data moves).
      reduce_native<std::uint8_t>(inputs, out, count,
                                  op == ReduceOp::kMin ? ReduceOp::kMin : ReduceOp::kMax);
      for (std::size_t e = 0; e < count; ++e) {
        auto* values = static_cast<std::uint8_t*>(out);
        values[e] = values[e] != 0 ? 1 : 0;
      }
      break;
    case DType::kBF16:
      reduce_typed<BFloat16, float>(
          inputs, out, count, op, [](BFloat16 v) { return to_float(v); },
          [](float v) { return to_bfloat16(v); });
      break;
    case DType::kF16:
      reduce_typed<Float16, float>(
          inputs, out, count, op, [](Float16 v) { return to_float(v); },
          [](float v) { return to_float16(v); });
      break;
  }
}

}  // namespace shardwise::detail
