#pragma once
// A chunk's linear layers' matrix products in its precision. fp32: the float32 products
// (matmul.hpp). bf16: each product reads its weight's bf16 copy (ParameterStore::compute_value)
// and the bf16 rounding of its input (and, in backward, of its output's gradient), accumulates
// in float32 and writes float32 (bf16_matmul.hpp); the parts round what a layer keeps
// (round_kept: the products' outputs, the norms', activations' and attention's outputs) as
// autocast's bf16 outputs are, with the arithmetic around them (norms, softmax, rotary, the
// loss, biases, the residual stream) in float32.

#include <cstddef>
#include <span>
#include <utility>
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

// Where a layer keeps one of its arrays in bf16: the float32 array the parts compute in and
// read, and its kept copy (the chunk's, for this layer and micro-batch).
struct KeptArray {
  const char* name = "";
  float* values = nullptr;
  BFloat16* kept = nullptr;
  std::size_t count = 0;
};

class Products {
 public:
  explicit Products(Precision precision) : precision_(precision) {}

  [[nodiscard]] Precision precision() const { return precision_; }
  // bf16: each of `count` values becomes its bf16 rounding (an array a layer keeps, or part of
  // one), and where it lies in one of the layer's kept arrays, that rounding is kept there in
  // the same pass (exact: the float32 values are the roundings); fp32: nothing.
  void round_kept(float* values, std::size_t count) const;
  // Backward: where `values` lie in a kept array, they are widened from it (what round_kept kept
  // in forward); elsewhere (float32, full recomputation's layer) they are as forward left them.
  void widen_kept(float* values, std::size_t count) const;
  // The layer whose kept arrays round_kept fills and the products read (their inputs' roundings
  // are then the kept copies, never rounded again); empty: none (float32, full recomputation,
  // decoding).
  void use_kept(std::vector<KeptArray> arrays) const;
  // After a layer's forward: a logic error naming a kept array round_kept did not fill whole.
  void check_kept() const;
  // The buffers the chunk's activation table holds for the roundings (kRoundedInput,
  // kRoundedOutputGrad); a product needing more is a logic error. Without them (decoding) the
  // products keep buffers of their own.
  void use_rounding_buffers(std::span<BFloat16> input, std::span<BFloat16> output_grad) const {
    input_buffer_ = input;
    output_grad_buffer_ = output_grad;
    buffers_given_ = true;
  }

  // out = inp W^T + bias, W the parameter `weight` of `p` (out_features x in), or where the
  // parameter stacks several such matrices (a Mixture of Experts' experts), its `block`-th.
  void forward(float* out, const float* inp, const ParameterView& p, std::size_t weight,
               const float* bias, std::size_t rows, std::size_t in, std::size_t out_features,
               Input input = Input::kNew, std::size_t block = 0) const;
  // matmul_backward's sums for the same product: dinp (+)= dout W, dW += dout^T inp, dbias +=
  // dout's column sums (dbias may be null; dW may be another buffer than W's gradient). dinp may
  // be inp.
  void backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                const ParameterView& p, std::size_t weight, std::size_t rows, std::size_t in,
                std::size_t out_features,
                kernels::InputGradient input_gradient = kernels::InputGradient::kAccumulate,
                Input input = Input::kNew, std::size_t block = 0) const;

 private:
  // The kept array holding [values, values + count) whole, or null.
  [[nodiscard]] KeptArray* kept_of(const float* values, std::size_t count) const;
  // `count` elements of `values` rounded into `buffer` where the chunk gave one (a logic error
  // naming `what` where it is too small), else into `own` (grown as needed).
  const BFloat16* rounded(std::span<BFloat16> buffer, std::vector<BFloat16>& own,
                          const float* values, std::size_t count, const char* what) const;
  // The input's rounding: kept, made, or the previous one (a logic error where it was of
  // another).
  const BFloat16* rounded_input(const float* inp, std::size_t count, Input input) const;

  Precision precision_;
  // The rounded inputs and output gradients of the product running now (one thread per chunk).
  mutable std::vector<BFloat16> input_, output_grad_;
  mutable std::span<BFloat16> input_buffer_, output_grad_buffer_;
  mutable bool buffers_given_ = false;
  mutable const BFloat16* input_rounding_ = nullptr;  // where the last input was rounded
  mutable const float* rounded_from_ = nullptr;
  mutable std::size_t rounded_count_ = 0;
  // The layer's kept arrays, and how many of each element round_kept has kept.
  mutable std::vector<KeptArray> kept_;
  mutable std::vector<std::size_t> filled_;
};

// A layer's kept arrays in use by the products for the scope's life (Products::use_kept), none
// after it, also where the layer throws.
class KeptInUse {
 public:
  KeptInUse(const Products& products, std::vector<KeptArray> arrays) : products_(products) {
    products_.use_kept(std::move(arrays));
  }
  ~KeptInUse() { products_.use_kept({}); }
  KeptInUse(const KeptInUse&) = delete;
  KeptInUse& operator=(const KeptInUse&) = delete;

 private:
  const Products& products_;
};

}  // namespace shardwise::train::transformer
