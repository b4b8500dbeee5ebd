#pragma once
// A chunk's linear layers' matrix products in its precision. fp32: the float32 products
// (matmul.hpp). bf16: each product reads its weight's bf16 copy (ParameterStore::compute_value)
// and the bf16 rounding of its input (and, in backward, of its output's gradient), accumulates
// in float32 and writes float32 (bf16_matmul.hpp): autocast's products, with everything around
// them (norms, softmax, rotary, the loss, biases) in float32.

#include <cstddef>
#include <vector>

#include "parameter_view.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/kernels/input_gradient.hpp"
#include "shardwise/strategy/precision.hpp"

namespace shardwise::train::transformer {

// Whether a product's input is rounded afresh, or is the input the previous product of this
// chunk rounded and unchanged since (q, k and v read one normed input; so do gate and up): its
// rounding is then reused.
enum class Input { kNew, kAsBefore };

class Products {
 public:
  explicit Products(Precision precision) : precision_(precision) {}

  [[nodiscard]] Precision precision() const { return precision_; }
  // out = inp W^T + bias, W the parameter `weight` of `p` (out_features x in).
  void forward(float* out, const float* inp, const ParameterView& p, std::size_t weight,
               const float* bias, std::size_t rows, std::size_t in, std::size_t out_features,
               Input input = Input::kNew) const;
  // matmul_backward's sums for the same product: dinp (+)= dout W, dW += dout^T inp, dbias +=
  // dout's column sums (dbias may be null; dW may be another buffer than W's gradient). dinp may
  // be inp.
  void backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                const ParameterView& p, std::size_t weight, std::size_t rows, std::size_t in,
                std::size_t out_features,
                kernels::InputGradient input_gradient = kernels::InputGradient::kAccumulate,
                Input input = Input::kNew) const;

 private:
  // `count` elements of `values` rounded into `into` (grown as needed).
  static const BFloat16* rounded(std::vector<BFloat16>& into, const float* values,
                                 std::size_t count);
  // The input's rounding: made, or the previous one (a logic error where it was of another).
  const BFloat16* rounded_input(const float* inp, std::size_t count, Input input) const;

  Precision precision_;
  // The rounded inputs and output gradients of the product running now (one thread per chunk).
  mutable std::vector<BFloat16> input_, output_grad_;
  mutable const float* rounded_from_ = nullptr;
  mutable std::size_t rounded_count_ = 0;
};

}  // namespace shardwise::train::transformer
