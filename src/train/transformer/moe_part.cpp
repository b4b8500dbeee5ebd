#include "moe_part.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/moe_router.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::train::transformer {

using kernels::InputGradient;

MoePart::MoePart(const TransformerShape& shape, const ModelAxis& axis)
    : hidden_(shape.hidden),
      experts_(shape.experts),
      k_(shape.experts_per_token),
      width_(shape.expert_width),
      renormalize_(shape.renormalize_routing),
      axis_(axis) {
  if (axis.tp().degree() > 1) {
    throw InvalidArgument("a Mixture of Experts over " + std::to_string(axis.tp().degree()) +
                          " model ranks: the experts are not split over the model axis; it runs "
                          "on one model rank, over data, fsdp and pipeline axes");
  }
  if (k_ < 1 || k_ > experts_) {
    throw InvalidArgument("a Mixture of Experts choosing " + std::to_string(k_) + " of " +
                          std::to_string(experts_) + " experts per token");
  }
}

MoePart::Routed MoePart::routed(float* arrays, std::size_t tokens) const {
  const std::size_t n = tokens * k_, C = hidden_, I = width_;
  Routed r{};
  r.inputs = arrays;
  r.gate_up = r.inputs + n * C;
  r.activation = r.gate_up + n * 2 * I;
  r.outputs = r.activation + n * I;
  return r;
}

void MoePart::choose(const float* probabilities, std::size_t tokens) const {
  chosen_.resize(tokens * k_);
  weights_.resize(tokens * k_);
  kernels::choose_experts(chosen_.data(), weights_.data(), probabilities, tokens, experts_, k_,
                          renormalize_);
  groups_ = kernels::group_by_expert(chosen_.data(), tokens, k_, experts_);
}

void MoePart::forward(float* out, float* arrays, float* router, const float* normed,
                      const ParameterView& p, const Rows& rows) const {
  const std::size_t C = hidden_, E = experts_, I = width_, BT = rows.whole, n = BT * k_;
  const Products& products = axis_.products();
  const Routed r = routed(arrays, BT);
  // The logits, then their softmax over them (float32: the router's statistics).
  products.forward(router, normed, p, 0, nullptr, BT, C, E);
  chosen_.resize(BT * k_);
  weights_.resize(BT * k_);
  kernels::route_forward(chosen_.data(), weights_.data(), router, router, BT, E, k_, renormalize_);
  groups_ = kernels::group_by_expert(chosen_.data(), BT, k_, E);
  kernels::gather_rows(r.inputs, normed, groups_, C);
  products.round_kept(r.inputs, n * C);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t rows_e = groups_.count(e), at = groups_.offsets[e];
    if (rows_e == 0) continue;
    products.forward(r.gate_up + at * 2 * I, r.inputs + at * C, p, 1, nullptr, rows_e, C, 2 * I,
                     Input::kNew, e);
  }
  products.round_kept(r.gate_up, n * 2 * I);
  kernels::swiglu_rows_forward(r.activation, r.gate_up, n, I);
  products.round_kept(r.activation, n * I);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t rows_e = groups_.count(e), at = groups_.offsets[e];
    if (rows_e == 0) continue;
    products.forward(r.outputs + at * C, r.activation + at * I, p, 2, nullptr, rows_e, I, C,
                     Input::kNew, e);
  }
  products.round_kept(r.outputs, n * C);
  kernels::combine_rows(out, r.outputs, weights_.data(), groups_, BT, C, k_);
}

void MoePart::backward(float* dnormed, const float* dout, float* arrays, float* router,
                       const float* normed, const ParameterView& p, const Rows& rows) const {
  const std::size_t C = hidden_, E = experts_, I = width_, BT = rows.whole, n = BT * k_;
  const Products& products = axis_.products();
  const Routed r = routed(arrays, BT);
  choose(router, BT);
  // The weights' gradients read the outputs; the outputs' gradients are written over them.
  products.widen_kept(r.outputs, n * C);
  dweights_.resize(BT * k_);
  kernels::combine_backward(dweights_.data(), r.outputs, dout, weights_.data(), groups_, C);
  // Each expert's products backward, each input's gradient over the input once its weight's
  // gradient has read it (the inputs themselves are read kept).
  products.widen_kept(r.gate_up, n * 2 * I);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t rows_e = groups_.count(e), at = groups_.offsets[e];
    if (rows_e == 0) continue;
    products.backward(r.activation + at * I, p.grad(2) + e * C * I, nullptr, r.outputs + at * C,
                      r.activation + at * I, p, 2, rows_e, I, C, InputGradient::kOverwrite,
                      Input::kNew, e);
  }
  kernels::swiglu_rows_backward(r.gate_up, r.activation, r.gate_up, n, I,
                                InputGradient::kOverwrite);
  for (std::size_t e = 0; e < E; ++e) {
    const std::size_t rows_e = groups_.count(e), at = groups_.offsets[e];
    if (rows_e == 0) continue;
    products.backward(r.inputs + at * C, p.grad(1) + e * 2 * I * C, nullptr, r.gate_up + at * 2 * I,
                      r.inputs + at * C, p, 1, rows_e, C, 2 * I, InputGradient::kOverwrite,
                      Input::kNew, e);
  }
  // The router: the logits' gradient over the probabilities, then its product's.
  kernels::route_backward(router, dweights_.data(), nullptr, router, chosen_.data(), BT, E, k_,
                          renormalize_);
  products.backward(dnormed, p.grad(0), nullptr, router, normed, p, 0, BT, C, E,
                    InputGradient::kOverwrite);
  kernels::scatter_add_rows(dnormed, r.inputs, groups_, BT, C, k_);
}

}  // namespace shardwise::train::transformer
