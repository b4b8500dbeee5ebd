#include "products.hpp"

#include <span>
#include <stdexcept>

#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::train::transformer {

const BFloat16* Products::rounded(std::vector<BFloat16>& into, const float* values,
                                  std::size_t count) {
  if (into.size() < count) into.resize(count);
  kernels::to_bf16(std::span<const float>(values, count), std::span<BFloat16>(into.data(), count));
  return into.data();
}

const BFloat16* Products::rounded_input(const float* inp, std::size_t count, Input input) const {
  if (input == Input::kAsBefore) {
    if (inp != rounded_from_ || count != rounded_count_) {
      throw std::logic_error("a product reused the rounding of another input");
    }
    return input_.data();
  }
  rounded_from_ = inp;
  rounded_count_ = count;
  return rounded(input_, inp, count);
}

void Products::forward(float* out, const float* inp, const ParameterView& p, std::size_t weight,
                       const float* bias, std::size_t rows, std::size_t in,
                       std::size_t out_features, Input input) const {
  if (precision_ == Precision::kFp32) {
    kernels::matmul_forward(out, inp, p.value(weight), bias, rows, in, out_features);
    return;
  }
  kernels::matmul_forward_bf16(out, rounded_input(inp, rows * in, input), p.compute(weight), bias,
                               rows, in, out_features);
}

void Products::backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const ParameterView& p, std::size_t weight,
                        std::size_t rows, std::size_t in, std::size_t out_features,
                        kernels::InputGradient input_gradient, Input input) const {
  if (precision_ == Precision::kFp32) {
    kernels::matmul_backward(dinp, dweight, dbias, dout, inp, p.value(weight), rows, in,
                             out_features, input_gradient);
    return;
  }
  // Both are rounded before dinp (which may be inp) is written.
  const BFloat16* inp16 = rounded_input(inp, rows * in, input);
  const BFloat16* dout16 = rounded(output_grad_, dout, rows * out_features);
  kernels::matmul_backward_bf16(dinp, dweight, dbias, dout16, inp16, p.compute(weight), rows, in,
                                out_features, input_gradient);
}

}  // namespace shardwise::train::transformer
