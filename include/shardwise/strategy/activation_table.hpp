#pragma once
// One table of a transformer chunk's activations (llm.c's idea: every buffer sized in one
// place): each part's arrays, in elements, for a chunk of a layout (micro-batch, sequence, model
// degree, sequence parallelism, recomputation, its layers and whether it holds the head). The
// training layer's chunk allocates from it, and the planner sums it for any layout, so the two
// cannot disagree on what a rank holds.
//
// Rows: a micro-batch's batch x seq positions are the chunk's whole rows (BT); under sequence
// parallelism a rank holds 1 / degree of them in the residual stream, the norms' statistics
// and the row-parallel outputs (R rows), and the whole rows everywhere the sequence is gathered
// (norms' outputs, attention, the MLP, the head).

#include <array>
#include <cstddef>

#include "shardwise/core/dtype.hpp"
#include "shardwise/strategy/element_types.hpp"
#include "shardwise/strategy/recompute.hpp"
#include "shardwise/strategy/transformer_shape.hpp"

namespace shardwise {

// The rows the head computes at a time: as many as hold at most 2^15 floats of a rank's
// vocabulary, but at least 128 and at most the micro-batch's; one block's logits and
// probabilities are all the head holds, never the batch's.
inline constexpr std::size_t kHeadBlockFloats = std::size_t{1} << 15;
inline constexpr std::size_t kHeadBlockMinRows = 128;
[[nodiscard]] std::size_t head_block_rows(std::size_t rows, std::size_t vocab_local);

// A Mixture of Experts over t model ranks (ParallelContext::experts_group) routes a share of a
// micro-batch's BT rows on each: rank r rows [first_moe_row(BT, t, r), first_moe_row(BT, t, r +
// 1)), whole sequences where t divides the batch; moe_rows(BT, t) is the most any rank routes.
[[nodiscard]] inline std::size_t first_moe_row(std::size_t rows, std::size_t t, std::size_t r) {
  return rows * r / t;
}
[[nodiscard]] inline std::size_t moe_rows(std::size_t rows, std::size_t t) {
  return (rows + t - 1) / t;
}

struct ChunkGeometry {
  std::size_t batch = 0;  // sequences of a micro-batch
  std::size_t seq = 0;
  std::size_t model_degree = 1;
  // Expert ranks a Mixture of Experts' experts are split over (1: none).
  std::size_t expert_degree = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  std::size_t layers = 0;  // the chunk's
  bool has_head = false;   // the chunk ends the model: final norm, head and loss
  // The products round their operands (bf16): the rounding buffers are held.
  bool rounded_products = false;
  // The residual stream is kept narrower than the chunk computes in (bf16): a layer's input is
  // widened into kStreamInput.
  bool narrow_stream = false;
};

// Every array of a chunk. What a layer keeps lives once per layer and micro-batch in flight (or,
// under full recomputation, once per chunk: the one layer recomputed at a time); a layer's output
// is kept under every recomputation; the micro-batch's arrays once per micro-batch; the scratch
// once per chunk.
enum class Activation : std::size_t {
  // A layer's, for its backward.
  kNorm1,             // BT x hidden: the first norm's output
  kNorm1Statistics,   // R x norm_statistics()
  kProjections,       // BT x (q + 2 kv widths): the queries, keys and values attended
  kQkNormInput,       // BT x (q + kv widths): the queries and keys before their norm
  kQkNormStatistics,  // BT x (this rank's heads + key/value heads)
  kAttention,         // BT x q width: attention's output
  kLogSumExp,         // batch x heads x seq: each query row's (no seq x seq matrix)
  kResidual2,         // R x hidden: the stream after attention
  kNorm2,             // BT x hidden
  kNorm2Statistics,   // R x norm_statistics()
  kMlp,               // BT (a Mixture of Experts: moe_rows) x TransformerShape::mlp_row_elements
  kRouter,            // moe_rows x experts, a Mixture of Experts: the router's probabilities
  kLayerOutput,       // R x hidden: the stream after the MLP (kept under full recomputation)
  // A micro-batch's.
  kInput,           // R x hidden: the chunk's input (the embeddings' output on the first)
  kHeadNorm,        // BT x hidden, with the head
  kHeadStatistics,  // R x norm_statistics(), with the head
  kLosses,          // BT, with the head
  // The chunk's scratch.
  kResidualGrad,        // R x hidden: the stream's gradient
  kWholeRows,           // BT x hidden: a row-parallel output (forward), a norm output's gradient
  kMlpGrad,             // BT x MLP width: GELU's input gradient (gated: written over gate, up)
  kAttentionGrads,      // BT x (2 q + 2 kv widths), where they do not fit the dead MLP arrays
  kLogits,              // block x vocabulary share, with the head (its gradient written over it)
  kProbabilities,       // block x vocabulary share, with the head
  kNormLocal,           // R x hidden, sequence parallel: a norm's rows before they are gathered
  kNormGradLocal,       // R x hidden, sequence parallel: a norm input's gradient scattered
  kPartialSum,          // BT x hidden, sequence parallel: a product before it is reduce-scattered
  kGathered,            // BT x hidden, sequence parallel: an output gradient gathered
  kNormParameterGrads,  // norm_parameters() x hidden, sequence parallel: one pass's share
  kQkNormGrads,  // 2 x head_dim, a norm of queries and keys over a model axis: a pass's share
  kKvHeadGrads,  // 2 x kv width x (hidden + bias), replicated key/value heads: a pass's share
  // R x hidden, a narrow stream: the chunk's input as computed, and in backward a layer's (or
  // the head's) input widened from the stream's kept rounding.
  kStreamInput,
  // Rounding products (bf16): a product's input rounded where no kept copy holds it (the head's
  // blocks; every input under full recomputation), and its output's gradient in backward.
  kRoundedInput,       // the largest such input
  kRoundedOutputGrad,  // the largest product's output, with the head's block
  kCount
};
inline constexpr std::size_t kActivationCount = static_cast<std::size_t>(Activation::kCount);

enum class Lifetime { kLayer, kLayerOutput, kMicroBatch, kScratch };
[[nodiscard]] Lifetime lifetime_of(Activation activation);
[[nodiscard]] const char* name_of(Activation activation);
// The arrays of statistics (norms' statistics, log-sum-exps, losses), whose element type is
// ElementTypes::statistics.
[[nodiscard]] bool is_statistic(Activation activation);
// What a layer keeps for backward of the products' inputs and outputs (the norms' outputs, the
// queries, keys and values, attention's output, the MLP's arrays): ElementTypes::activations.
// The residual stream is ElementTypes::stream; the chunk's scratch ElementTypes::working; the
// products' rounding buffers ElementTypes::compute.
[[nodiscard]] bool is_kept(Activation activation);
// The residual stream's arrays: a layer's input and output, the sum after attention.
[[nodiscard]] bool is_stream(Activation activation);
[[nodiscard]] DType element_type_of(Activation activation, const ElementTypes& types);
// The type an array is computed in: ElementTypes::working for a kept array or the stream's,
// else its own.
[[nodiscard]] DType working_type_of(Activation activation, const ElementTypes& types);
// Whether an array is kept in a narrower type than it is computed in (its layer computes it in
// the working layer and keeps its rounding).
[[nodiscard]] bool kept_rounded(Activation activation, const ElementTypes& types);

class ActivationTable {
 public:
  // InvalidArgument naming what the model degree does not divide (heads, key/value heads, the
  // MLP's width, the vocabulary) or, under sequence parallelism, the micro-batch's rows.
  ActivationTable(const TransformerShape& shape, const ChunkGeometry& geometry);

  [[nodiscard]] std::size_t elements(Activation activation) const {
    return elements_[static_cast<std::size_t>(activation)];
  }
  // Rows of the residual stream this rank holds (R) and of the whole micro-batch (BT).
  [[nodiscard]] std::size_t local_rows() const { return local_rows_; }
  [[nodiscard]] std::size_t whole_rows() const { return whole_rows_; }
  [[nodiscard]] std::size_t head_block() const { return head_block_; }
  // Whether attention's gradients are written over the MLP's arrays, dead once the backward has
  // passed the MLP (else kAttentionGrads holds them).
  [[nodiscard]] bool attention_grads_in_mlp() const { return attention_grads_in_mlp_; }
  // The sum of a lifetime's arrays.
  [[nodiscard]] std::size_t elements(Lifetime lifetime) const;
  // What one layer holds for one micro-batch: everything kept, its output included.
  [[nodiscard]] std::size_t layer_elements() const;
  // What the chunk holds with `slots` micro-batches in flight: each slot's layers, outputs and
  // micro-batch arrays, the working layer, and the scratch.
  [[nodiscard]] std::size_t chunk_elements(std::size_t slots) const;

  // The same in bytes, each array of its element type.
  [[nodiscard]] std::size_t bytes(Activation activation, const ElementTypes& types) const;
  [[nodiscard]] std::size_t bytes(Lifetime lifetime, const ElementTypes& types) const;
  [[nodiscard]] std::size_t layer_bytes(const ElementTypes& types) const;
  [[nodiscard]] std::size_t chunk_bytes(std::size_t slots, const ElementTypes& types) const;
  // The one layer a chunk computes its layers in, besides the layers it keeps: under full
  // recomputation the layer recomputed (every array of a layer, in its working type); else the
  // arrays kept narrower than they are computed in (kept_rounded), in their working type (each
  // layer's computed there and then kept rounded); under both, a layer's output where the
  // stream is narrow.
  [[nodiscard]] std::size_t working_layer_bytes(const ElementTypes& types) const;

 private:
  // A lifetime's arrays, and the chunk's, in elements (types null) or bytes (each array in its
  // kept type, or with `working`, in the type it is computed in).
  [[nodiscard]] std::size_t sum(Lifetime lifetime, const ElementTypes* types,
                                bool working = false) const;
  // The working layer in elements (types null: full recomputation's layer only) or bytes.
  [[nodiscard]] std::size_t working_layer(const ElementTypes* types) const;
  [[nodiscard]] std::size_t chunk_sum(std::size_t slots, const ElementTypes* types) const;

  std::array<std::size_t, kActivationCount> elements_{};
  std::size_t local_rows_ = 0, whole_rows_ = 0, head_block_ = 0;
  std::size_t layers_ = 0;
  Recompute recompute_ = Recompute::kNone;
  bool attention_grads_in_mlp_ = false;
};

}  // namespace shardwise
