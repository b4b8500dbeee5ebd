#pragma once
// The token embedding split by vocabulary over the model axis (each rank looks up the tokens of
// its rows, the sum over the axis completes the lookups, scattered along the sequence under
// sequence parallelism), with learned positions added where the model has them.

#include <cstddef>
#include <cstdint>

#include "model_axis.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise::train::transformer {

class EmbeddingPart {
 public:
  EmbeddingPart(const TransformerShape& shape, const ModelAxis& axis);

  // This rank's rows of the vocabulary.
  [[nodiscard]] std::size_t vocab_local() const { return vocab_local_; }
  [[nodiscard]] std::size_t vocab_start() const { return vocab_start_; }

  // `out`: this rank's rows of the stream.
  void forward(float* out, const std::int32_t* tokens, const ParameterView& p,
               const Rows& rows) const;
  // Generation: `count` tokens of one sequence, the first at `first_position`, every row whole.
  void decode(float* out, const std::int32_t* tokens, std::size_t count, std::size_t first_position,
              const ParameterView& p) const;
  // Adds the parameters' gradients from `dout` (this rank's rows of the stream's gradient).
  void backward(const float* dout, const std::int32_t* tokens, const ParameterView& p,
                const Rows& rows) const;

 private:
  bool learned_positions_ = false;
  std::size_t hidden_ = 0, vocab_local_ = 0, vocab_start_ = 0;
  const ModelAxis& axis_;
};

}  // namespace shardwise::train::transformer
