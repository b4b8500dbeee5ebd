#include "products.hpp"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::train::transformer {

const BFloat16* Products::rounded(std::span<BFloat16> buffer, std::vector<BFloat16>& own,
                                  const float* values, std::size_t count, const char* what) const {
  BFloat16* into = nullptr;
  if (buffers_given_) {
    if (count > buffer.size()) {
      throw std::logic_error(std::string("a product's ") + what + " of " + std::to_string(count) +
                             " elements exceeds the chunk's rounding buffer of " +
                             std::to_string(buffer.size()));
    }
    into = buffer.data();
  } else {
    if (own.size() < count) own.resize(count);
    into = own.data();
  }
  kernels::to_bf16(std::span<const float>(values, count), std::span<BFloat16>(into, count));
  return into;
}

const BFloat16* Products::rounded_input(const float* inp, std::size_t count, Input input) const {
  if (const KeptArray* array = kept_of(inp, count)) {
    return array->kept + (inp - array->values);
  }
  if (input == Input::kAsBefore) {
    if (inp != rounded_from_ || count != rounded_count_) {
      throw std::logic_error("a product reused the rounding of another input");
    }
    return input_rounding_;
  }
  rounded_from_ = inp;
  rounded_count_ = count;
  input_rounding_ = rounded(input_buffer_, input_, inp, count, "input");
  return input_rounding_;
}

KeptArray* Products::kept_of(const float* values, std::size_t count) const {
  const auto at = reinterpret_cast<std::uintptr_t>(values);
  for (KeptArray& array : kept_) {
    const auto first = reinterpret_cast<std::uintptr_t>(array.values);
    if (at >= first && at + count * sizeof(float) <= first + array.count * sizeof(float)) {
      return &array;
    }
  }
  return nullptr;
}

void Products::round_kept(float* values, std::size_t count) const {
  if (precision_ != Precision::kBf16) return;
  KeptArray* array = kept_of(values, count);
  if (array == nullptr) {
    kernels::round_to_bf16(std::span<float>(values, count));
    return;
  }
  const auto offset = static_cast<std::size_t>(values - array->values);
  kernels::round_to_bf16(std::span<float>(values, count),
                         std::span<BFloat16>(array->kept + offset, count));
  filled_[static_cast<std::size_t>(array - kept_.data())] += count;
}

void Products::widen_kept(float* values, std::size_t count) const {
  const KeptArray* array = kept_of(values, count);
  if (array == nullptr) return;
  const auto offset = static_cast<std::size_t>(values - array->values);
  kernels::to_float(std::span<const BFloat16>(array->kept + offset, count),
                    std::span<float>(values, count));
}

void Products::use_kept(std::vector<KeptArray> arrays) const {
  kept_ = std::move(arrays);
  filled_.assign(kept_.size(), 0);
  rounded_from_ = nullptr;
  rounded_count_ = 0;
}

void Products::check_kept() const {
  for (std::size_t i = 0; i < kept_.size(); ++i) {
    if (filled_[i] != kept_[i].count) {
      throw std::logic_error(std::string("a layer kept ") + std::to_string(filled_[i]) + " of " +
                             std::to_string(kept_[i].count) + " elements of its " + kept_[i].name +
                             " array in bf16");
    }
  }
}

void Products::forward(float* out, const float* inp, const ParameterView& p, std::size_t weight,
                       const float* bias, std::size_t rows, std::size_t in,
                       std::size_t out_features, Input input, std::size_t block) const {
  const std::size_t at = block * in * out_features;
  if (precision_ == Precision::kFp32) {
    kernels::matmul_forward(out, inp, p.value(weight) + at, bias, rows, in, out_features);
    return;
  }
  kernels::matmul_forward_bf16(out, rounded_input(inp, rows * in, input), p.compute(weight) + at,
                               bias, rows, in, out_features);
}

void Products::backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const ParameterView& p, std::size_t weight,
                        std::size_t rows, std::size_t in, std::size_t out_features,
                        kernels::InputGradient input_gradient, Input input,
                        std::size_t block) const {
  const std::size_t at = block * in * out_features;
  if (precision_ == Precision::kFp32) {
    kernels::matmul_backward(dinp, dweight, dbias, dout, inp, p.value(weight) + at, rows, in,
                             out_features, input_gradient);
    return;
  }
  // Both are rounded before dinp (which may be inp) is written.
  const BFloat16* inp16 = rounded_input(inp, rows * in, input);
  const BFloat16* dout16 =
      rounded(output_grad_buffer_, output_grad_, dout, rows * out_features, "output gradient");
  kernels::matmul_backward_bf16(dinp, dweight, dbias, dout16, inp16, p.compute(weight) + at, rows,
                                in, out_features, input_gradient);
}

}  // namespace shardwise::train::transformer
