#include "moe_part.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/moe_router.hpp"
#include "shardwise/kernels/swiglu.hpp"
#include "shardwise/strategy/activation_table.hpp"

namespace shardwise::train::transformer {

using kernels::InputGradient;

MoePart::MoePart(const TransformerShape& shape, const ModelAxis& axis,
                 const ExpertParallel& experts, double capacity_factor)
    : hidden_(shape.hidden),
      experts_count_(shape.experts),
      k_(shape.experts_per_token),
      width_(shape.expert_width),
      renormalize_(shape.renormalize_routing),
      capacity_factor_(capacity_factor),
      axis_(axis),
      experts_(experts) {
  if (experts.degree() % axis.tp().degree() != 0) {
    throw InvalidArgument("a Mixture of Experts over " + std::to_string(axis.tp().degree()) +
                          " model ranks whose experts are split over " +
                          std::to_string(experts.degree()) +
                          " ranks: they are folded over the model axis, so the ranks that split "
                          "them are the model x expert ranks");
  }
  if (k_ < 1 || k_ > experts_count_) {
    throw InvalidArgument("a Mixture of Experts choosing " + std::to_string(k_) + " of " +
                          std::to_string(experts_count_) + " experts per token");
  }
  if (!(capacity_factor >= 0 && capacity_factor <= 1e6)) {
    throw InvalidArgument("capacity_factor is " + std::to_string(capacity_factor) +
                          "; expected 0 (dropless) or a factor up to 1e6");
  }
  if (experts_count_ % static_cast<std::size_t>(experts.degree()) != 0) {
    throw InvalidArgument("a Mixture of Experts of " + std::to_string(experts_count_) +
                          " experts over " + std::to_string(experts.degree()) +
                          " ranks (model x expert), which do not divide them");
  }
}

MoePart::Routed MoePart::routed(float* arrays, std::size_t tokens) const {
  const std::size_t n = tokens * k_, C = hidden_, I = width_;
  Routed r{};
  r.inputs = arrays;
  if (dispatched()) {  // the experts' arrays are the received rows'
    r.outputs = r.inputs + n * C;
    return r;
  }
  r.gate_up = r.inputs + n * C;
  r.activation = r.gate_up + n * 2 * I;
  r.outputs = r.activation + n * I;
  return r;
}

void MoePart::choose(const float* probabilities, const Rows& rows, const float* bias) const {
  chosen_.resize(rows.whole * k_);
  weights_.resize(rows.whole * k_);
  kernels::choose_experts(chosen_.data(), weights_.data(), probabilities, rows.whole,
                          experts_count_, k_, renormalize_, bias);
  (void)group(rows);
}

std::size_t MoePart::group(const Rows& rows) const {
  if (capacity_factor_ == 0) {
    groups_ = kernels::group_by_expert(chosen_.data(), rows.whole, k_, experts_count_);
    return 0;
  }
  dropped_.resize(rows.whole * k_);
  const std::size_t dropped = kernels::drop_over_capacity(
      dropped_.data(), chosen_.data(), rows.whole, rows.seq, k_, experts_count_,
      kernels::expert_capacity(capacity_factor_, rows.seq, k_, experts_count_));
  groups_ =
      kernels::group_by_expert(chosen_.data(), rows.whole, k_, experts_count_, dropped_.data());
  return dropped;
}

void MoePart::hold(const ExpertRows& rows, bool more) const {
  const std::size_t bytes =
      (rows.inputs.size() + rows.gate_up.size() + rows.activation.size() + rows.outputs.size()) *
      sizeof(float);
  expert_bytes_ = more ? expert_bytes_ + bytes : expert_bytes_ - bytes;
  peak_expert_bytes_ = std::max(peak_expert_bytes_, expert_bytes_);
}

void MoePart::experts_forward(const Routed& x, const ExpertDispatch& d,
                              const ParameterView& p) const {
  const std::size_t C = hidden_, I = width_, n = d.received_rows();
  const Products& products = axis_.products();
  for (std::size_t l = 0; l < d.local_experts(); ++l) {
    const std::size_t rows = d.expert_rows(l), at = d.expert_offset(l);
    if (rows == 0) continue;
    products.forward(x.gate_up + at * 2 * I, x.inputs + at * C, p, 1, nullptr, rows, C, 2 * I,
                     Input::kNew, l);
  }
  products.round_kept(x.gate_up, n * 2 * I);
  kernels::swiglu_rows_forward(x.activation, x.gate_up, n, I);
  products.round_kept(x.activation, n * I);
  for (std::size_t l = 0; l < d.local_experts(); ++l) {
    const std::size_t rows = d.expert_rows(l), at = d.expert_offset(l);
    if (rows == 0) continue;
    products.forward(x.outputs + at * C, x.activation + at * I, p, 2, nullptr, rows, I, C,
                     Input::kNew, l);
  }
}

void MoePart::experts_backward(const Routed& x, const ExpertDispatch& d,
                               const ParameterView& p) const {
  const std::size_t C = hidden_, I = width_, n = d.received_rows();
  const Products& products = axis_.products();
  // Each expert's products backward, each input's gradient over the input once its weight's
  // gradient has read it (the inputs themselves are read kept).
  products.widen_kept(x.gate_up, n * 2 * I);
  for (std::size_t l = 0; l < d.local_experts(); ++l) {
    const std::size_t rows = d.expert_rows(l), at = d.expert_offset(l);
    if (rows == 0) continue;
    products.backward(x.activation + at * I, p.grad(2) + l * C * I, nullptr, x.outputs + at * C,
                      x.activation + at * I, p, 2, rows, I, C, InputGradient::kOverwrite,
                      Input::kNew, l);
  }
  kernels::swiglu_rows_backward(x.gate_up, x.activation, x.gate_up, n, I,
                                InputGradient::kOverwrite);
  for (std::size_t l = 0; l < d.local_experts(); ++l) {
    const std::size_t rows = d.expert_rows(l), at = d.expert_offset(l);
    if (rows == 0) continue;
    products.backward(x.inputs + at * C, p.grad(1) + l * 2 * I * C, nullptr, x.gate_up + at * 2 * I,
                      x.inputs + at * C, p, 1, rows, C, 2 * I, InputGradient::kOverwrite,
                      Input::kNew, l);
  }
}

Rows MoePart::share(const Rows& rows, std::size_t* first) const {
  const auto t = static_cast<std::size_t>(axis_.tp().degree());
  const auto r = static_cast<std::size_t>(axis_.tp().rank());
  if (capacity_factor_ > 0 && rows.batch % t != 0) {
    // A capacity counts each sequence's choices in token order: a rank routes whole sequences.
    throw InvalidArgument("capacity_factor " + std::to_string(capacity_factor_) + " over " +
                          std::to_string(t) +
                          " model ranks, each routing whole sequences of a micro-batch of " +
                          std::to_string(rows.batch) + " sequences, which they do not divide");
  }
  *first = first_moe_row(rows.whole, t, r);
  const std::size_t count = first_moe_row(rows.whole, t, r + 1) - *first;
  return {rows.batch % t == 0 ? rows.batch / t : 0, rows.seq, count, count};
}

void MoePart::forward(float* out, float* arrays, float* router, const float* normed,
                      const ParameterView& p, const Rows& rows, double* routing,
                      const float* bias) const {
  const std::size_t t = static_cast<std::size_t>(axis_.tp().degree()), C = hidden_;
  if (t == 1) {
    forward_rows(out, arrays, router, normed, p, rows, rows.whole, routing, bias);
    return;
  }
  std::size_t first = 0;
  const Rows mine = share(rows, &first);
  // This rank's share of every whole row, zeros outside its rows, summed over the axis.
  float* const whole = axis_.partial_rows(out);
  std::fill(whole, whole + first * C, 0.0F);
  std::fill(whole + (first + mine.whole) * C, whole + rows.whole * C, 0.0F);
  forward_rows(whole + first * C, arrays, router, normed + first * C, p, mine,
               moe_rows(rows.whole, t), routing, bias);
  axis_.sum_partial_rows(out, rows);
}

void MoePart::forward_rows(float* out, float* arrays, float* router, const float* normed,
                           const ParameterView& p, const Rows& rows, std::size_t most_rows,
                           double* routing, const float* bias) const {
  const std::size_t C = hidden_, E = experts_count_, I = width_, BT = rows.whole, n = BT * k_;
  const Products& products = axis_.products();
  const Routed r = routed(arrays, BT);
  // The logits, then their softmax over them (float32: the router's statistics).
  products.forward(router, normed, p, 0, nullptr, BT, C, E);
  chosen_.resize(BT * k_);
  weights_.resize(BT * k_);
  kernels::route_forward(chosen_.data(), weights_.data(), router, router, BT, E, k_, renormalize_,
                         bias);
  if (routing != nullptr) {
    kernels::add_routing_statistics(routing, routing + E, router, chosen_.data(), BT, E, k_);
  }
  dropped_rows_ += group(rows);
  // Dropped choices have no row: the rows are the first groups_.rows() of the table's n, the
  // rest zeros (kept whole, as every kept array is).
  const std::size_t rows_kept = groups_.rows();
  kernels::gather_rows(r.inputs, normed, groups_, C);
  const auto zero_tail = [&](float* array, std::size_t width) {
    std::fill(array + rows_kept * width, array + n * width, 0.0F);
  };
  zero_tail(r.inputs, C);
  products.round_kept(r.inputs, n * C);
  routed_rows_ += n;
  if (!dispatched()) {
    computed_rows_ += rows_kept;
    experts_forward(r, ExpertDispatch(experts_, groups_, E, n), p);
    if (rows_kept < n) {
      zero_tail(r.gate_up, 2 * I);
      zero_tail(r.activation, I);
      products.round_kept(r.gate_up + rows_kept * 2 * I, (n - rows_kept) * 2 * I);
      products.round_kept(r.activation + rows_kept * I, (n - rows_kept) * I);
    }
  } else {
    ExpertRows& kept = received_[router];
    hold(kept, false);
    kept.dispatch = ExpertDispatch(experts_, groups_, E, most_rows * k_);
    const std::size_t m = kept.dispatch.received_rows();
    computed_rows_ += m;
    kept.inputs.resize(m * C);
    kept.gate_up.resize(m * 2 * I);
    kept.activation.resize(m * I);
    kept.outputs.resize(m * C);
    hold(kept, true);
    const Routed x{kept.inputs.data(), kept.gate_up.data(), kept.activation.data(),
                   kept.outputs.data()};
    kept.dispatch.to_experts(experts_, r.inputs, x.inputs, C, staging_);
    experts_forward(x, kept.dispatch, p);
    products.round_kept(x.outputs, m * C);
    kept.dispatch.from_experts(experts_, x.outputs, r.outputs, C, staging_);
  }
  zero_tail(r.outputs, C);
  products.round_kept(r.outputs, n * C);
  kernels::combine_rows(out, r.outputs, weights_.data(), groups_, BT, C, k_);
}

void MoePart::backward(float* dnormed, const float* dout, float* arrays, float* router,
                       const float* normed, const ParameterView& p, const Rows& rows,
                       const float* dprobability, const float* bias, double* counts) const {
  const std::size_t t = static_cast<std::size_t>(axis_.tp().degree()), C = hidden_;
  if (t == 1) {
    backward_rows(dnormed, dout, arrays, router, normed, p, rows, dprobability, bias, counts,
                  p.grad(0));
    return;
  }
  std::size_t first = 0;
  const Rows mine = share(rows, &first);
  std::fill(dnormed, dnormed + first * C, 0.0F);
  std::fill(dnormed + (first + mine.whole) * C, dnormed + rows.whole * C, 0.0F);
  // The router's gradient from this rank's rows, summed over the axis (float32, as the norms').
  router_grad_.assign(experts_count_ * C, 0.0F);
  backward_rows(dnormed + first * C, dout + first * C, arrays, router, normed + first * C, p, mine,
                dprobability, bias, counts, router_grad_.data());
  axis_.tp().sum(router_grad_.data(), router_grad_.size());
  float* const grad = p.grad(0);
  for (std::size_t i = 0; i < router_grad_.size(); ++i) grad[i] += router_grad_[i];
}

void MoePart::backward_rows(float* dnormed, const float* dout, float* arrays, float* router,
                            const float* normed, const ParameterView& p, const Rows& rows,
                            const float* dprobability, const float* bias, double* counts,
                            float* router_grad) const {
  const std::size_t C = hidden_, E = experts_count_, BT = rows.whole, n = BT * k_;
  const Products& products = axis_.products();
  const Routed r = routed(arrays, BT);
  choose(router, rows, bias);
  if (counts != nullptr) {
    for (std::size_t i = 0; i < n; ++i) counts[chosen_[i]] += 1;
  }
  // The weights' gradients read the outputs; the outputs' gradients are written over them.
  products.widen_kept(r.outputs, n * C);
  dweights_.resize(BT * k_);
  kernels::combine_backward(dweights_.data(), r.outputs, dout, weights_.data(), groups_, C);
  if (!dispatched()) {
    experts_backward(r, ExpertDispatch(experts_, groups_, E, n), p);
  } else {
    const auto found = received_.find(router);
    if (found == received_.end()) {
      throw InvalidArgument("a Mixture of Experts' backward without its forward's expert rows");
    }
    ExpertRows& kept = found->second;
    const Routed x{kept.inputs.data(), kept.gate_up.data(), kept.activation.data(),
                   kept.outputs.data()};
    kept.dispatch.to_experts(experts_, r.outputs, x.outputs, C, staging_);
    experts_backward(x, kept.dispatch, p);
    kept.dispatch.from_experts(experts_, x.inputs, r.inputs, C, staging_);
    hold(kept, false);
    received_.erase(found);
  }
  // The router: the logits' gradient over the probabilities, then its product's.
  kernels::route_backward(router, dweights_.data(), dprobability, router, chosen_.data(), BT, E, k_,
                          renormalize_);
  products.backward(dnormed, router_grad, nullptr, router, normed, p, 0, BT, C, E,
                    InputGradient::kOverwrite);
  kernels::scatter_add_rows(dnormed, r.inputs, groups_, BT, C, k_);
}

}  // namespace shardwise::train::transformer
