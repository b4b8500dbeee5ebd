#include "model_axis.hpp"

#include "shardwise/kernels/matmul.hpp"

namespace shardwise::train::transformer {

void ModelAxis::gather_norm(float* whole, const Rows& rows) const {
  if (sequence_parallel_) {
    tp_.gather_sequence(whole, scratch_.norm_local, rows.batch, rows.seq, hidden_);
  }
}

void ModelAxis::row_parallel(float* out, const float* inp, const float* weight, const float* bias,
                             std::size_t in_local, const Rows& rows) const {
  const std::size_t C = hidden_;
  if (!sequence_parallel_) {
    tp_.row_parallel_forward(out, inp, weight, bias, rows.whole, in_local, C);
    return;
  }
  kernels::matmul_forward(scratch_.partial, inp, weight, nullptr, rows.whole, in_local, C);
  tp_.reduce_scatter_sequence(out, scratch_.partial, rows.batch, rows.seq, C);
  if (bias == nullptr) return;
  for (std::size_t r = 0; r < rows.local; ++r) {
    for (std::size_t c = 0; c < C; ++c) out[r * C + c] += bias[c];
  }
}

const float* ModelAxis::column_input_grad(float* whole, const Rows& rows) const {
  if (!sequence_parallel_) {
    tp_.sum(whole, rows.whole * hidden_);
    return whole;
  }
  tp_.reduce_scatter_sequence(scratch_.norm_grad_local, whole, rows.batch, rows.seq, hidden_);
  return scratch_.norm_grad_local;
}

const float* ModelAxis::whole_output_grad(const float* local, const Rows& rows) const {
  if (!sequence_parallel_) return local;
  tp_.gather_sequence(scratch_.gathered, local, rows.batch, rows.seq, hidden_);
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
