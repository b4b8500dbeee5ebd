#pragma once
// The end of the model: the final norm, the output head (its own matrix or the token embedding,
// split by vocabulary over the model axis) and the cross-entropy of each row, a block of rows at
// a time (shardwise::head_block_rows), so that no rows x vocabulary logits live across a pass.
// Targets kernels::kIgnoredTarget count nothing.

#include <cstddef>
#include <cstdint>

#include "model_axis.hpp"
#include "norm_part.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"

namespace shardwise::train::transformer {

class HeadPart {
 public:
  HeadPart(const NormPart& norm, const ModelAxis& axis, std::size_t vocab_local,
           std::size_t vocab_start)
      : norm_(norm), axis_(axis), vocab_local_(vocab_local), vocab_start_(vocab_start) {}

  // Each row's loss into `losses` (whole rows); `normed` and `statistics` kept for backward;
  // `logits` and `probabilities` hold `block` rows.
  void forward(float* losses, float* normed, float* statistics, const float* inp,
               const std::int32_t* targets, float* logits, float* probabilities, std::size_t block,
               const ParameterView& norm, const ParameterView& head, const Rows& rows) const;
  // The gradient of the mean of the rows' losses times `loss_scale`: into the parameters, and
  // written to `dinp` (this rank's rows of the stream); `dnormed` is whole-rows scratch.
  void backward(float* dinp, float* dnormed, float loss_scale, const float* inp,
                const float* normed, const float* statistics, const std::int32_t* targets,
                float* logits, float* probabilities, std::size_t block, const ParameterView& norm,
                const ParameterView& head, const Rows& rows) const;

 private:
  const NormPart& norm_;
  const ModelAxis& axis_;
  std::size_t vocab_local_, vocab_start_;
};

}  // namespace shardwise::train::transformer
