#include "mlp_part.hpp"

#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::train::transformer {

using kernels::InputGradient;

MlpPart::MlpPart(const TransformerShape& shape, const ModelAxis& axis,
                 const ExpertParallel& experts, double capacity_factor)
    : moe_(shape.moe()
               ? std::optional<MoePart>(std::in_place, shape, axis, experts, capacity_factor)
               : std::nullopt),
      kind_(shape.mlp),
      bias_(shape.mlp == MlpKind::kGelu && shape.mlp_bias),
      hidden_(shape.hidden),
      width_(shape.mlp_width / static_cast<std::size_t>(axis.tp().degree())),
      shape_(shape),
      axis_(axis) {}

bool MlpPart::routes(std::size_t layer) const { return shape_.moe_layer(layer); }

void MlpPart::forward(std::size_t layer, float* out, float* arrays, float* router,
                      const float* normed, const ParameterView& p, const Rows& rows,
                      double* routing, const float* bias) const {
  if (routes(layer)) {
    moe_->forward(out, arrays, router, normed, p, rows, routing, bias);
    return;
  }
  const std::size_t C = hidden_, W = width_, BT = rows.whole;
  const Products& products = axis_.products();
  if (kind_ == MlpKind::kGelu) {
    // fc, proj: [weight, bias] each with biases.
    const std::size_t proj = bias_ ? 2 : 1;
    float* const fc = arrays;
    float* const act = arrays + BT * W;
    products.forward(fc, normed, p, 0, bias_ ? p.read(1) : nullptr, BT, C, W);
    products.round_kept(fc, BT * W);
    kernels::gelu_forward(act, fc, BT * W);
    products.round_kept(act, BT * W);
    axis_.row_parallel(out, act, p, proj, bias_ ? p.read(proj + 1) : nullptr, W, rows);
    return;
  }
  float* const gate = arrays;
  float* const up = arrays + BT * W;
  float* const act = up + BT * W;
  products.forward(gate, normed, p, 0, nullptr, BT, C, W);
  products.forward(up, normed, p, 1, nullptr, BT, C, W, Input::kAsBefore);
  products.round_kept(gate, 2 * BT * W);  // gate and up
  kernels::swiglu_forward(act, gate, up, BT * W);
  products.round_kept(act, BT * W);
  axis_.row_parallel(out, act, p, 2, nullptr, W, rows);
}

void MlpPart::backward(std::size_t layer, float* dnormed, float* scratch, const float* dout,
                       float* arrays, float* router, const float* normed, const ParameterView& p,
                       const Rows& rows, const float* dprobability, const float* bias,
                       double* counts) const {
  if (routes(layer)) {
    moe_->backward(dnormed, dout, arrays, router, normed, p, rows, dprobability, bias, counts);
    return;
  }
  const std::size_t C = hidden_, W = width_, BT = rows.whole;
  const Products& products = axis_.products();
  // The product's input gradient over the product itself (its weight's gradient reads it first).
  if (kind_ == MlpKind::kGelu) {
    const std::size_t proj = bias_ ? 2 : 1;
    float* const fc = arrays;
    float* const act = arrays + BT * W;
    products.widen_kept(fc, BT * W);  // (act is the product's input, read kept)
    products.backward(act, p.grad(proj), bias_ ? p.grad(proj + 1) : nullptr, dout, act, p, proj, BT,
                      W, C, InputGradient::kOverwrite);
    kernels::gelu_backward(scratch, fc, act, BT * W, InputGradient::kOverwrite);
    products.backward(dnormed, p.grad(0), bias_ ? p.grad(1) : nullptr, scratch, normed, p, 0, BT, C,
                      W, InputGradient::kOverwrite);
    return;
  }
  float* const gate = arrays;
  float* const up = arrays + BT * W;
  float* const act = up + BT * W;
  products.widen_kept(gate, 2 * BT * W);  // gate and up (act is the product's input, read kept)
  products.backward(act, p.grad(2), nullptr, dout, act, p, 2, BT, W, C, InputGradient::kOverwrite);
  // gate's and up's gradients over gate and up (the kernel reads an element before it writes).
  kernels::swiglu_backward(gate, up, act, gate, up, BT * W, InputGradient::kOverwrite);
  products.backward(dnormed, p.grad(0), nullptr, gate, normed, p, 0, BT, C, W,
                    InputGradient::kOverwrite);
  products.backward(dnormed, p.grad(1), nullptr, up, normed, p, 1, BT, C, W,
                    InputGradient::kAccumulate, Input::kAsBefore);
}

}  // namespace shardwise::train::transformer
