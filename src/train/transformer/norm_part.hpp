#pragma once
// A norm over the residual stream's rows (LayerNorm with weight and bias, or RMSNorm with a
// weight): its statistics kept per row (this rank's rows), its output whole (gathered along the
// sequence under sequence parallelism), since the column-parallel products after it read every
// row.

#include <cstddef>

#include "model_axis.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise::train::transformer {

class NormPart {
 public:
  // Where `round_stream`, the residual stream is kept in bf16: residual_forward's sum is rounded
  // (Products::round_kept) before the norm reads it.
  NormPart(NormKind kind, float eps, const ModelAxis& axis, bool round_stream = false)
      : kind_(kind), eps_(eps), axis_(axis), round_stream_(round_stream) {}

  // out (whole rows) = norm(inp) (this rank's rows), rounded as the chunk keeps it
  // (Products::round_kept); `statistics` R x norm_statistics().
  void forward(float* out, float* statistics, const float* inp, const ParameterView& p,
               const Rows& rows) const;
  // sum = a + b (rounded where the stream is bf16), then out = norm(sum): the residual add and
  // the norm after it.
  void residual_forward(float* sum, float* out, float* statistics, const float* a, const float* b,
                        const ParameterView& p, const Rows& rows) const;
  // Adds d(inp) into `dinp` (this rank's rows) and the parameters' gradients, from `dout` (this
  // rank's rows of the output's gradient, summed over the axis).
  void backward(float* dinp, const float* dout, const float* inp, const float* statistics,
                const ParameterView& p, const Rows& rows) const;

 private:
  NormKind kind_;
  float eps_;
  const ModelAxis& axis_;
  bool round_stream_ = false;
};

}  // namespace shardwise::train::transformer
