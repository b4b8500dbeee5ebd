#pragma once
// Megatron-LM's tensor-parallel layers over the model axis of a ParallelContext, for any model:
//  - column-parallel linear (weight split by output features): a plain product on each rank's
//    block; the gradient of the shared input is summed over the axis (sum()) once every
//    column-parallel layer reading it has added its part;
//  - row-parallel linear (weight split by input features): the partial products summed over the
//    axis, then the bias added once; backward is the plain product's;
//  - vocabulary-parallel embedding: each rank looks up the tokens its rows hold, the lookups
//    summed over the axis;
//  - vocabulary-parallel cross-entropy: each rank holds the logits of its part of the
//    vocabulary; the softmax takes a max and two sums over the axis, and no rank ever holds the
//    whole logits.
// Sequence parallelism (Korthikanti et al. 2022) splits the activations between those layers along
// the sequence over the same axis: an all-gather along the sequence before each column-parallel
// layer and a reduce-scatter after each row-parallel one replace the all-reduces
// (gather_sequence, reduce_scatter_sequence). A rank's part of a (batch, seq, channels)
// activation is (batch, seq / t, channels): positions [r seq / t, (r + 1) seq / t) of every
// sequence.
// Degree 1 (no model axis) runs the plain kernels and communicates nothing.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/train/parallel_context.hpp"

namespace shardwise::train {

class TensorParallel {
 public:
  // Degree 1.
  TensorParallel() = default;
  // Over `context`'s model axis.
  explicit TensorParallel(const ParallelContext& context);

  [[nodiscard]] int degree() const { return degree_; }
  [[nodiscard]] int rank() const { return rank_; }
  // The axis' communicator (null at degree 1) and group: what a Mixture of Experts folded over
  // the axis alone dispatches over (ExpertParallel, decoding).
  [[nodiscard]] Communicator* communicator() const { return comm_; }
  [[nodiscard]] const Group& group() const { return group_; }

  // Sums `count` values over the axis, in place. The activation messages below take a
  // `message` type: float32, or bf16 (each rank's values travel rounded to bf16 and the sum
  // comes back rounded, as Megatron-LM's bf16 all-reduces; half the bytes).
  void sum(float* values, std::size_t count, DType message = DType::kF32) const;
  // Sums `count` values, in place, over the `sharers` consecutive ranks of the axis this rank is
  // one of (ranks [r / sharers * sharers, ... + sharers)): those holding one block of a
  // parameter (SharedRows). `sharers` must divide the degree.
  void sum_among(float* values, std::size_t count, int sharers) const;

  // full (count x degree) = every rank's `local` (count values) in rank order: a
  // vocabulary-parallel head's logits made whole on every rank. Degree 1 copies.
  void gather(float* full, const float* local, std::size_t count) const;
  // Every rank's `values` become model rank 0's: one choice (a sampled token) on every rank,
  // whatever rounding their own copies of it saw.
  void share_first(std::int32_t* values, std::size_t count) const;

  // full (batch, seq, channels) = every rank's `local` (batch, seq / t, channels) in sequence
  // order; degree 1 copies.
  void gather_sequence(float* full, const float* local, std::size_t batch, std::size_t seq,
                       std::size_t channels, DType message = DType::kF32) const;
  // local (batch, seq / t, channels) = this rank's positions of the sum over the axis of every
  // rank's `full` (batch, seq, channels); degree 1 copies.
  void reduce_scatter_sequence(float* local, const float* full, std::size_t batch, std::size_t seq,
                               std::size_t channels, DType message = DType::kF32) const;

  // out (rows x channels) = this rank's rows of the token embedding for each token it holds,
  // zeros for the others: the part of the lookups that sum() or reduce_scatter_sequence()
  // completes.
  // A bf16 table (bf16 mixed precision's copy) is widened as it is read.
  void lookup(float* out, const std::int32_t* tokens, const float* wte, std::size_t rows,
              std::size_t channels, std::size_t vocab_start, std::size_t vocab_local) const;
  void lookup(float* out, const std::int32_t* tokens, const BFloat16* wte, std::size_t rows,
              std::size_t channels, std::size_t vocab_start, std::size_t vocab_local) const;
  // Adds into this rank's rows of the token embedding.
  void lookup_backward(float* dwte, const float* dout, const std::int32_t* tokens, std::size_t rows,
                       std::size_t channels, std::size_t vocab_start,
                       std::size_t vocab_local) const;

  // out (batch x seq x channels) = the token embedding of each token (this rank holds rows
  // [vocab_start, vocab_start + vocab_local)) + its position's embedding.
  // The lookups' sum travels in `message` (sum()).
  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                         std::size_t batch, std::size_t seq, std::size_t channels,
                         std::size_t vocab_start, std::size_t vocab_local,
                         DType message = DType::kF32) const;
  void embedding_forward(float* out, const std::int32_t* tokens, const BFloat16* wte,
                         const float* wpe, std::size_t batch, std::size_t seq, std::size_t channels,
                         std::size_t vocab_start, std::size_t vocab_local,
                         DType message = DType::kF32) const;
  // Adds into this rank's rows of the token embedding and into the position embedding.
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          std::size_t batch, std::size_t seq, std::size_t channels,
                          std::size_t vocab_start, std::size_t vocab_local) const;

  // The cross-entropy of every row over the whole vocabulary, from this rank's logits (rows x
  // vocab_local, columns [vocab_start, ...)): losses per row; probs keeps this rank's part of
  // the softmax for backward.
  void cross_entropy_forward(float* losses, float* probs, const float* logits,
                             const std::int32_t* targets, std::size_t rows, std::size_t vocab_local,
                             std::size_t vocab_start) const;
  // dlogits (this rank's columns) += (probs - onehot(target)) * dlosses[row].
  void cross_entropy_backward(float* dlogits, const float* dlosses, const float* probs,
                              const std::int32_t* targets, std::size_t rows,
                              std::size_t vocab_local, std::size_t vocab_start) const;

 private:
  template <typename Table>
  void lookup_rows(float* out, const std::int32_t* tokens, const Table* wte, std::size_t rows,
                   std::size_t channels, std::size_t vocab_start, std::size_t vocab_local) const;
  template <typename Table>
  void embed(float* out, const std::int32_t* tokens, const Table* wte, const float* wpe,
             std::size_t batch, std::size_t seq, std::size_t channels, std::size_t vocab_start,
             std::size_t vocab_local, DType message) const;

  Communicator* comm_ = nullptr;
  Group group_;
  mutable Group sharers_group_;         // sum_among's ranks, made at its first call
  mutable std::vector<float> staging_;  // every rank's part of a sequence gather or scatter
  mutable std::vector<BFloat16> staging16_, local16_;  // the same, and this rank's, in bf16
  int degree_ = 1;
  int rank_ = 0;
};

}  // namespace shardwise::train
