#include "embedding_part.hpp"

#include <algorithm>

namespace shardwise::train::transformer {
namespace {

// Calls `use` with the token table as the computation reads it: the values in float32, the
// bf16 copy (widened row by row) in bf16.
template <typename Use>
void with_token_table(const ParameterView& p, Use use) {
  if (p.precision() == Precision::kFp32) {
    use(static_cast<const float*>(p.value(0)));
  } else {
    use(p.compute(0));
  }
}

}  // namespace

EmbeddingPart::EmbeddingPart(const TransformerShape& shape, const ModelAxis& axis)
    : learned_positions_(shape.positions == PositionKind::kLearned),
      hidden_(shape.hidden),
      vocab_local_(shape.vocab / static_cast<std::size_t>(axis.tp().degree())),
      vocab_start_(static_cast<std::size_t>(axis.tp().rank()) * vocab_local_),
      axis_(axis) {}

void EmbeddingPart::forward(float* out, const std::int32_t* tokens, const ParameterView& p,
                            const Rows& rows) const {
  const TensorParallel& tp = axis_.tp();
  const std::size_t C = hidden_;
  if (!axis_.sequence_parallel()) {
    with_token_table(p, [&](const auto* wte) {
      if (learned_positions_) {
        tp.embedding_forward(out, tokens, wte, p.read(1), rows.batch, rows.seq, C, vocab_start_,
                             vocab_local_, axis_.messages());
      } else {
        tp.lookup(out, tokens, wte, rows.whole, C, vocab_start_, vocab_local_);
        tp.sum(out, rows.whole * C, axis_.messages());
      }
    });
    return;
  }
  // Each rank's rows of the token embedding, summed and scattered along the sequence; then the
  // positions this rank holds.
  float* const partial = axis_.scratch().partial;
  with_token_table(p, [&](const auto* wte) {
    tp.lookup(partial, tokens, wte, rows.whole, C, vocab_start_, vocab_local_);
  });
  tp.reduce_scatter_sequence(out, partial, rows.batch, rows.seq, C, axis_.messages());
  if (!learned_positions_) return;
  const std::size_t positions = rows.seq / static_cast<std::size_t>(tp.degree());
  const float* wpe = p.read(1) + static_cast<std::size_t>(tp.rank()) * positions * C;
  for (std::size_t r = 0; r < rows.local; ++r) {
    for (std::size_t c = 0; c < C; ++c) out[r * C + c] += wpe[(r % positions) * C + c];
  }
}

void EmbeddingPart::backward(const float* dout, const std::int32_t* tokens, const ParameterView& p,
                             const Rows& rows) const {
  const TensorParallel& tp = axis_.tp();
  const std::size_t C = hidden_;
  if (learned_positions_ && !axis_.sequence_parallel()) {
    tp.embedding_backward(p.grad(0), p.grad(1), dout, tokens, rows.batch, rows.seq, C, vocab_start_,
                          vocab_local_);
    return;
  }
  if (learned_positions_) {
    // The positions this rank holds, summed over the axis (in scratch: this pass's part).
    const std::size_t positions = rows.seq / static_cast<std::size_t>(tp.degree());
    const std::size_t first = static_cast<std::size_t>(tp.rank()) * positions;
    float* const dpositions = axis_.scratch().partial;  // seq x C of its BT x C
    std::fill(dpositions, dpositions + rows.seq * C, 0.0F);
    for (std::size_t r = 0; r < rows.local; ++r) {
      for (std::size_t c = 0; c < C; ++c)
        dpositions[(first + r % positions) * C + c] += dout[r * C + c];
    }
    tp.sum(dpositions, rows.seq * C);
    float* dwpe = p.grad(1);
    for (std::size_t i = 0; i < rows.seq * C; ++i) dwpe[i] += dpositions[i];
  }
  // Every rank has the whole gradient of the lookups' output; each adds into its vocabulary rows.
  tp.lookup_backward(p.grad(0), axis_.whole_output_grad(dout, rows), tokens, rows.whole, C,
                     vocab_start_, vocab_local_);
}

void EmbeddingPart::decode(float* out, const std::int32_t* tokens, std::size_t count,
                           std::size_t first_position, const ParameterView& p) const {
  const TensorParallel& tp = axis_.tp();
  const std::size_t C = hidden_;
  with_token_table(p, [&](const auto* wte) {
    tp.lookup(out, tokens, wte, count, C, vocab_start_, vocab_local_);
  });
  tp.sum(out, count * C, axis_.messages());
  if (!learned_positions_) return;
  const float* wpe = p.read(1);
  for (std::size_t r = 0; r < count; ++r) {
    for (std::size_t c = 0; c < C; ++c) out[r * C + c] += wpe[(first_position + r) * C + c];
  }
}

}  // namespace shardwise::train::transformer
