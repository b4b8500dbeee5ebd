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

template <typename T>
void reduce_native(const std::vector<const void*>& inputs, void* out, std::size_t count,
                   ReduceOp op) {
  reduce_typed<T, T>(
      inputs, out, count, op, [](T v) { return v; }, [](T v) { return v; });
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
