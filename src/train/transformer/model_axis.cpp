#include "model_axis.hpp"

namespace shardwise::train::transformer {

void ModelAxis::gather_norm(float* whole, const Rows& rows) const {
  if (sequence_parallel_) {
    tp_.gather_sequence(whole, scratch_.norm_local, rows.batch, rows.seq, hidden_, messages_);
  }
}

namespace {

void add_bias(float* out, const float* bias, std::size_t rows, std::size_t channels) {
  if (bias == nullptr) return;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < channels; ++c) out[r * channels + c] += bias[c];
  }
}

}  // namespace

void ModelAxis::row_parallel(float* out, const float* inp, const ParameterView& p,
                             std::size_t weight, const float* bias, std::size_t in_local,
                             const Rows& rows) const {
  const std::size_t C = hidden_;
  if (!sequence_parallel_) {
    row_parallel(out, inp, p, weight, bias, in_local, rows.whole);
    return;
  }
  products_.forward(partial_rows(out), inp, p, weight, nullptr, rows.whole, in_local, C);
  sum_partial_rows(out, rows);
  add_bias(out, bias, rows.local, C);
}

void ModelAxis::sum_partial_rows(float* out, const Rows& rows) const {
  if (sequence_parallel_) {
    tp_.reduce_scatter_sequence(out, scratch_.partial, rows.batch, rows.seq, hidden_, messages_);
  } else {
    tp_.sum(out, rows.whole * hidden_, messages_);
  }
}

void ModelAxis::row_parallel(float* out, const float* inp, const ParameterView& p,
                             std::size_t weight, const float* bias, std::size_t in_local,
                             std::size_t count) const {
  const std::size_t C = hidden_;
  // One rank adds the bias in the product; several add it once, after the sum.
  const bool alone = tp_.degree() == 1;
  products_.forward(out, inp, p, weight, alone ? bias : nullptr, count, in_local, C);
  if (alone) return;
  tp_.sum(out, count * C, messages_);
  add_bias(out, bias, count, C);
}

const float* ModelAxis::column_input_grad(float* whole, const Rows& rows) const {
  if (!sequence_parallel_) {
    tp_.sum(whole, rows.whole * hidden_, messages_);
    return whole;
  }
  tp_.reduce_scatter_sequence(scratch_.norm_grad_local, whole, rows.batch, rows.seq, hidden_,
                              messages_);
  return scratch_.norm_grad_local;
}

const float* ModelAxis::whole_output_grad(const float* local, const Rows& rows) const {
  if (!sequence_parallel_) return local;
  tp_.gather_sequence(scratch_.gathered, local, rows.batch, rows.seq, hidden_, messages_);
  return scratch_.gathered;
}

void ModelAxis::sum_norm_parameter_grads(float* const* grads, std::size_t count) const {
  tp_.sum(scratch_.norm_parameter_grads, count * hidden_);
  for (std::size_t p = 0; p < count; ++p) {
    for (std::size_t c = 0; c < hidden_; ++c)
      grads[p][c] += scratch_.norm_parameter_grads[p * hidden_ + c];
  }
}

}  // namespace shardwise::train::transformer
