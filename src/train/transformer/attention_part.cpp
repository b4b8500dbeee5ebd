#include "attention_part.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/attention.hpp"
#include "shardwise/kernels/cached_attention.hpp"
#include "shardwise/kernels/rmsnorm.hpp"

namespace shardwise::train::transformer {

using kernels::InputGradient;

AttentionPart::AttentionPart(const TransformerSpec& spec, const ModelAxis& axis)
    : shape_(spec.shape), axis_(axis), norm_eps_(static_cast<float>(spec.norm_eps)) {
  const int degree = axis.tp().degree();
  const auto t = static_cast<std::size_t>(degree);
  if (shape_.fused_qkv && (shape_.kv_heads != shape_.heads || shape_.qk_norm)) {
    throw InvalidArgument(
        "a stacked q, k and v projection needs as many key/value heads as heads and no norm of "
        "queries and keys");
  }
  head_dim_ = shape_.head_dim;
  heads_ = shape_.heads / t;
  q_width_ = heads_ * head_dim_;
  replicated_kv_ = shape_.replicates_kv_heads(t);
  kv_heads_ = shape_.kv_heads_of(t);
  kv_sharers_ = replicated_kv_ ? static_cast<int>(t / shape_.kv_heads) : 1;
  kv_width_ = kv_heads_ * head_dim_;
  if (shape_.positions == PositionKind::kRotary) {
    frequencies_ = kernels::rotary_frequencies(head_dim_, spec.rope_theta, spec.rope_scaling);
  }
}

std::size_t AttentionPart::replicated_kv_first_row() const {
  const auto r = static_cast<std::size_t>(axis_.tp().rank());
  return r / static_cast<std::size_t>(kv_sharers_) * head_dim_;
}

AttentionPart::Layout AttentionPart::layout(const Rows& rows) const {
  if (shape_.fused_qkv) return {q_width_, 2 * q_width_, 3 * q_width_, 3 * q_width_};
  return {rows.whole * q_width_, rows.whole * (q_width_ + kv_width_), q_width_, kv_width_};
}

const kernels::RotaryTable& AttentionPart::rotary(std::size_t seq) {
  if (rotary_.positions() < seq) rotary_ = kernels::RotaryTable(frequencies_, seq);
  return rotary_;
}

std::size_t AttentionPart::output_weight() const {
  return (shape_.fused_qkv ? 1 : 3) * (shape_.qkv_bias ? 2 : 1);
}

std::size_t AttentionPart::q_norm_weight() const {
  return output_weight() + (shape_.attention_output_bias ? 2 : 1);
}

void AttentionPart::norm_queries_and_keys(float* q, float* k, const float* q_input,
                                          const float* k_input, float* statistics, std::size_t rows,
                                          const ParameterView& p) const {
  const std::size_t n = q_norm_weight();
  kernels::rmsnorm_forward(q, statistics, q_input, p.read(n), norm_eps_, rows * heads_, head_dim_);
  kernels::rmsnorm_forward(k, statistics + rows * heads_, k_input, p.read(n + 1), norm_eps_,
                           rows * kv_heads_, head_dim_);
}

void AttentionPart::forward(float* out, const Arrays& a, const float* normed,
                            const ParameterView& p, const Rows& rows) {
  const std::size_t C = shape_.hidden, BT = rows.whole;
  const Products& products = axis_.products();
  const Layout at = layout(rows);
  float* q = a.projections;
  float* k = a.projections + at.k_offset;
  float* v = a.projections + at.v_offset;
  const std::size_t b = shape_.qkv_bias ? 2 : 1;  // places per projection
  const auto bias = [&](std::size_t weight) {
    return shape_.qkv_bias ? p.read(weight + 1) : nullptr;
  };
  if (shape_.fused_qkv) {
    products.forward(q, normed, p, 0, bias(0), BT, C, 3 * q_width_);
  } else {
    // With a norm of queries and keys the products are kept before it, for its backward.
    float* const q_out = shape_.qk_norm ? a.qk_input : q;
    float* const k_out = shape_.qk_norm ? a.qk_input + BT * q_width_ : k;
    products.forward(q_out, normed, p, 0, bias(0), BT, C, q_width_);
    products.forward(k_out, normed, p, b, bias(b), BT, C, kv_width_, Input::kAsBefore);
    products.forward(v, normed, p, 2 * b, bias(2 * b), BT, C, kv_width_, Input::kAsBefore);
    if (shape_.qk_norm) {
      // The products' outputs are kept for the norm's backward, rounded as the norm reads them.
      products.round_kept(a.qk_input, BT * (q_width_ + kv_width_));
      norm_queries_and_keys(q, k, q_out, k_out, a.qk_statistics, BT, p);
    }
  }
  if (!frequencies_.empty()) {
    rotary(rows.seq).rotate(q, rows.batch, rows.seq, heads_, at.q_stride);
    rotary(rows.seq).rotate(k, rows.batch, rows.seq, kv_heads_, at.kv_stride);
  }
  // The queries, keys and values attended are the ones kept for backward.
  products.round_kept(a.projections, BT * (q_width_ + 2 * kv_width_));
  const kernels::AttentionLayout attention_layout{
      rows.batch, rows.seq,    heads_,       kv_heads_,
      head_dim_,  at.q_stride, at.kv_stride, products.precision() == Precision::kBf16};
  kernels::attention_forward(a.attention, a.lse, q, k, v, attention_layout);
  products.round_kept(a.attention, BT * q_width_);
  const std::size_t o = output_weight();
  axis_.row_parallel(out, a.attention, p, o, shape_.attention_output_bias ? p.read(o + 1) : nullptr,
                     q_width_, rows);
}

void AttentionPart::backward(float* dnormed, float* grads, const Scratch& scratch,
                             const float* dout, const float* normed, const Arrays& a,
                             const ParameterView& p, const Rows& rows) {
  const std::size_t C = shape_.hidden, BT = rows.whole;
  const Products& products = axis_.products();
  const Layout at = layout(rows);
  const std::size_t o = output_weight();
  // What backward reads of the kept arrays besides the products' inputs.
  products.widen_kept(a.projections, BT * (q_width_ + 2 * kv_width_));
  if (shape_.qk_norm) products.widen_kept(a.qk_input, BT * (q_width_ + kv_width_));
  products.widen_kept(a.attention, BT * q_width_);
  float* const dattention = grads;
  float* const dq = grads + BT * q_width_;
  float* const dk = dq + at.k_offset;
  float* const dv = dq + at.v_offset;
  products.backward(dattention, p.grad(o), shape_.attention_output_bias ? p.grad(o + 1) : nullptr,
                    dout, a.attention, p, o, BT, q_width_, C, InputGradient::kOverwrite);
  const kernels::AttentionLayout attention_layout{
      rows.batch, rows.seq,    heads_,       kv_heads_,
      head_dim_,  at.q_stride, at.kv_stride, products.precision() == Precision::kBf16};
  kernels::attention_backward(dq, dk, dv, dattention, a.projections, a.projections + at.k_offset,
                              a.projections + at.v_offset, a.attention, a.lse, attention_layout,
                              InputGradient::kOverwrite);
  if (!frequencies_.empty()) {
    rotary(rows.seq).rotate_back(dq, rows.batch, rows.seq, heads_, at.q_stride);
    rotary(rows.seq).rotate_back(dk, rows.batch, rows.seq, kv_heads_, at.kv_stride);
  }
  const std::size_t b = shape_.qkv_bias ? 2 : 1;
  const auto dbias = [&](std::size_t weight) {
    return shape_.qkv_bias ? p.grad(weight + 1) : nullptr;
  };
  if (shape_.fused_qkv) {
    products.backward(dnormed, p.grad(0), dbias(0), dq, normed, p, 0, BT, C, 3 * q_width_,
                      InputGradient::kOverwrite);
    return;
  }
  if (shape_.qk_norm) {
    const float* q_input = a.qk_input;
    const float* k_input = a.qk_input + BT * q_width_;
    // Each rank's heads give their part of the norms' gradients: summed over the model axis in
    // scratch (this pass's part). The inputs' gradients are written over dq and dk (the kernel
    // reads an element before it writes it).
    const std::size_t n = q_norm_weight();
    const bool shared = axis_.tp().degree() > 1;
    float* const dq_norm = shared ? scratch.qk_norm_grads : p.grad(n);
    float* const dk_norm = shared ? scratch.qk_norm_grads + head_dim_ : p.grad(n + 1);
    if (shared) std::fill(scratch.qk_norm_grads, scratch.qk_norm_grads + 2 * head_dim_, 0.0F);
    kernels::rmsnorm_backward(dq, dq_norm, dq, q_input, p.read(n), a.qk_statistics, BT * heads_,
                              head_dim_, InputGradient::kOverwrite);
    kernels::rmsnorm_backward(dk, dk_norm, dk, k_input, p.read(n + 1),
                              a.qk_statistics + BT * heads_, BT * kv_heads_, head_dim_,
                              InputGradient::kOverwrite);
    if (shared) {
      axis_.tp().sum(scratch.qk_norm_grads, 2 * head_dim_);
      for (std::size_t i = 0; i < head_dim_; ++i) {
        p.grad(n)[i] += scratch.qk_norm_grads[i];
        p.grad(n + 1)[i] += scratch.qk_norm_grads[head_dim_ + i];
      }
    }
  }
  products.backward(dnormed, p.grad(0), dbias(0), dq, normed, p, 0, BT, C, q_width_,
                    InputGradient::kOverwrite);
  // A replicated key/value head: this pass's gradient of it in scratch, summed over the ranks
  // holding it (each adding its query heads' part), then added: every copy receives the same
  // whole gradient.
  const std::size_t kv_block = kv_width_ * C;
  const std::size_t kv_bias = shape_.qkv_bias ? kv_width_ : 0;
  float* const kv_grads = scratch.kv_grads;
  float* dk_weight = replicated_kv_ ? kv_grads : p.grad(b);
  float* dv_weight = replicated_kv_ ? kv_grads + kv_block : p.grad(2 * b);
  float* dk_bias = replicated_kv_ ? (kv_bias != 0 ? kv_grads + 2 * kv_block : nullptr) : dbias(b);
  float* dv_bias =
      replicated_kv_ ? (kv_bias != 0 ? kv_grads + 2 * kv_block + kv_bias : nullptr) : dbias(2 * b);
  const std::size_t kv_scratch = 2 * (kv_block + kv_bias);
  if (replicated_kv_) std::fill(kv_grads, kv_grads + kv_scratch, 0.0F);
  products.backward(dnormed, dk_weight, dk_bias, dk, normed, p, b, BT, C, kv_width_,
                    InputGradient::kAccumulate, Input::kAsBefore);
  products.backward(dnormed, dv_weight, dv_bias, dv, normed, p, 2 * b, BT, C, kv_width_,
                    InputGradient::kAccumulate, Input::kAsBefore);
  if (!replicated_kv_) return;
  axis_.tp().sum_among(kv_grads, kv_scratch, kv_sharers_);
  float* const held[4] = {p.grad(b), p.grad(2 * b), dbias(b), dbias(2 * b)};
  const float* const summed[4] = {kv_grads, kv_grads + kv_block, dk_bias, dv_bias};
  const std::size_t counts[4] = {kv_block, kv_block, kv_bias, kv_bias};
  for (std::size_t j = 0; j < 4; ++j) {
    for (std::size_t i = 0; i < counts[j]; ++i) held[j][i] += summed[j][i];
  }
}

void AttentionPart::decode(float* out, float* queries, float* attention, float* qk_statistics,
                           float* keys, float* values, std::size_t first_position, std::size_t rows,
                           const float* normed, const ParameterView& p) {
  const std::size_t C = shape_.hidden;
  const Products& products = axis_.products();
  const auto bias = [&](std::size_t weight) {
    return shape_.qkv_bias ? p.read(weight + 1) : nullptr;
  };
  float* const new_keys = keys + first_position * kv_width_;
  float* const new_values = values + first_position * kv_width_;
  if (shape_.fused_qkv) {
    // One product for the three, then this rank's keys and values copied into the caches.
    products.forward(queries, normed, p, 0, bias(0), rows, C, 3 * q_width_);
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = queries + r * 3 * q_width_;
      std::copy(row + q_width_, row + 2 * q_width_, new_keys + r * kv_width_);
      std::copy(row + 2 * q_width_, row + 3 * q_width_, new_values + r * kv_width_);
    }
  } else {
    // The new positions' keys and values go straight into the caches, normed and rotated there.
    const std::size_t b = shape_.qkv_bias ? 2 : 1;
    products.forward(queries, normed, p, 0, bias(0), rows, C, q_width_);
    products.forward(new_keys, normed, p, b, bias(b), rows, C, kv_width_, Input::kAsBefore);
    products.forward(new_values, normed, p, 2 * b, bias(2 * b), rows, C, kv_width_,
                     Input::kAsBefore);
    if (shape_.qk_norm) {
      products.round_kept(queries, rows * q_width_);
      products.round_kept(new_keys, rows * kv_width_);
      norm_queries_and_keys(queries, new_keys, queries, new_keys, qk_statistics, rows, p);
    }
  }
  const std::size_t q_stride = query_scratch_width();
  if (!frequencies_.empty()) {
    const kernels::RotaryTable& table = rotary(first_position + rows);
    table.rotate_positions(queries, first_position, rows, heads_, q_stride);
    table.rotate_positions(new_keys, first_position, rows, kv_heads_, kv_width_);
  }
  // Rounded as training's forward rounds them (forward): the cache holds what it would keep.
  products.round_kept(queries, rows * q_stride);
  products.round_kept(new_keys, rows * kv_width_);
  products.round_kept(new_values, rows * kv_width_);
  const kernels::CachedAttentionLayout layout{first_position, rows,     heads_,   kv_heads_,
                                              head_dim_,      q_stride, kv_width_};
  kernels::cached_attention_forward(attention, queries, keys, values, layout);
  products.round_kept(attention, rows * q_width_);
  const std::size_t o = output_weight();
  axis_.row_parallel(out, attention, p, o, shape_.attention_output_bias ? p.read(o + 1) : nullptr,
                     q_width_, rows);
}

}  // namespace shardwise::train::transformer
