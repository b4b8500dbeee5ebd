#include "norm_part.hpp"

#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/rmsnorm.hpp"

namespace shardwise::train::transformer {

void NormPart::forward(float* out, float* statistics, const float* inp, const ParameterView& p,
                       const Rows& rows) const {
  const std::size_t C = axis_.hidden(), R = rows.local;
  float* local = axis_.norm_rows(out);
  if (kind_ == NormKind::kLayerNorm) {
    kernels::layernorm_forward(local, statistics, statistics + R, inp, p.read(0), p.read(1), R, C);
  } else {
    kernels::rmsnorm_forward(local, statistics, inp, p.read(0), eps_, R, C);
  }
  axis_.gather_norm(out, rows);
  axis_.products().round_kept(out, rows.whole * C);
}

void NormPart::residual_forward(float* sum, float* out, float* statistics, const float* a,
                                const float* b, const ParameterView& p, const Rows& rows) const {
  const std::size_t C = axis_.hidden(), R = rows.local;
  if (kind_ == NormKind::kLayerNorm && !round_stream_) {
    // LayerNorm's kernel adds the two in the same pass over the rows.
    kernels::residual_layernorm_forward(sum, axis_.norm_rows(out), statistics, statistics + R, a, b,
                                        p.read(0), p.read(1), R, C);
    axis_.gather_norm(out, rows);
    axis_.products().round_kept(out, rows.whole * C);
    return;
  }
  kernels::residual_forward(sum, a, b, R * C);
  if (round_stream_) axis_.products().round_kept(sum, R * C);
  forward(out, statistics, sum, p, rows);
}

void NormPart::backward(float* dinp, const float* dout, const float* inp, const float* statistics,
                        const ParameterView& p, const Rows& rows) const {
  const std::size_t C = axis_.hidden(), R = rows.local;
  float* const grads[2] = {p.grad(0), kind_ == NormKind::kLayerNorm ? p.grad(1) : nullptr};
  const std::size_t count = kind_ == NormKind::kLayerNorm ? 2 : 1;
  axis_.norm_parameter_grads(grads, count, [&](float* const* into) {
    if (kind_ == NormKind::kLayerNorm) {
      kernels::layernorm_backward(dinp, into[0], into[1], dout, inp, p.read(0), statistics,
                                  statistics + R, R, C);
    } else {
      kernels::rmsnorm_backward(dinp, into[0], dout, inp, p.read(0), statistics, R, C);
    }
  });
}

}  // namespace shardwise::train::transformer
