#pragma once
// Causal self-attention over this rank's heads (Megatron-LM's split): column-parallel query, key
// and value projections (one stacked matrix, or three, with or without biases), rotary positions
// where the model has them, FlashAttention-style attention keeping each row's log-sum-exp, and a
// row-parallel output projection. Key/value heads are split over the model axis, or, where
// their count divides the degree, each held whole by degree / kv_heads ranks (vLLM's rule), the
// projections' gradients then summed among those ranks.

#include <cstddef>
#include <vector>

#include "model_axis.hpp"
#include "parameter_view.hpp"
#include "rows.hpp"
#include "shardwise/kernels/rotary.hpp"
#include "shardwise/train/transformer_spec.hpp"

namespace shardwise::train::transformer {

class AttentionPart {
 public:
  AttentionPart(const TransformerSpec& spec, const ModelAxis& axis);

  // This rank's widths.
  [[nodiscard]] std::size_t heads() const { return heads_; }
  [[nodiscard]] std::size_t kv_heads() const { return kv_heads_; }
  [[nodiscard]] std::size_t q_width() const { return q_width_; }
  [[nodiscard]] std::size_t kv_width() const { return kv_width_; }
  [[nodiscard]] bool replicated_kv() const { return replicated_kv_; }
  // The first row of the whole key/value projection this rank's store must hold where the heads
  // are replicated (the head its query heads read).
  [[nodiscard]] std::size_t replicated_kv_first_row() const;

  // A layer's arrays (the activation table's kProjections, kQkNormInput, kQkNormStatistics,
  // kAttention, kLogSumExp) and the backward's scratch (kQkNormGrads, kKvHeadGrads).
  struct Arrays {
    float* projections = nullptr;
    float* qk_input = nullptr;
    float* qk_statistics = nullptr;
    float* attention = nullptr;
    float* lse = nullptr;
  };
  struct Scratch {
    float* qk_norm_grads = nullptr;
    float* kv_grads = nullptr;
  };

  // The arrays from `normed` (whole rows); `out` gets the output projection's rows this rank
  // holds.
  void forward(float* out, const Arrays& a, const float* normed, const ParameterView& p,
               const Rows& rows);
  // From the output's gradient (whole rows): the parameters' gradients added, the input's
  // gradient written to `dnormed` (whole rows, this rank's part). `grads` holds 2 q + 2 kv widths
  // per row.
  void backward(float* dnormed, float* grads, const Scratch& scratch, const float* dout,
                const float* normed, const Arrays& a, const ParameterView& p, const Rows& rows);
  // Generation: `rows` new positions of one sequence from `normed` (rows x hidden), their keys
  // and values (rotated) appended to the layer's caches at `first_position` (kv width apart),
  // attending to every position cached before; `queries` holds rows x query_scratch_width(),
  // `attention` rows x q width, `qk_statistics` rows x (heads + key/value heads) where queries
  // and keys are normed; `out` gets the output projection, summed over the axis.
  void decode(float* out, float* queries, float* attention, float* qk_statistics, float* keys,
              float* values, std::size_t first_position, std::size_t rows, const float* normed,
              const ParameterView& p);
  // Sizes the rotary table for `positions` at once (a decoder's capacity), so that decoding
  // never builds it again.
  void reserve_positions(std::size_t positions) { (void)rotary(positions); }
  [[nodiscard]] std::size_t query_scratch_width() const {
    return shape_.fused_qkv ? 3 * q_width_ : q_width_;
  }

 private:
  // Where q, k and v lie in a projections array (or their gradients in a gradients array) and
  // the strides of their rows.
  struct Layout {
    std::size_t k_offset = 0, v_offset = 0, q_stride = 0, kv_stride = 0;
  };
  [[nodiscard]] Layout layout(const Rows& rows) const;
  [[nodiscard]] const kernels::RotaryTable& rotary(std::size_t seq);
  // The parameters' places in the view.
  [[nodiscard]] std::size_t output_weight() const;
  [[nodiscard]] std::size_t q_norm_weight() const;
  // Each head's queries and keys normed (RMSNorm over head_dim): `rows` rows of q (q_rows
  // heads each) and of k from their inputs.
  void norm_queries_and_keys(float* q, float* k, const float* q_input, const float* k_input,
                             float* statistics, std::size_t rows, const ParameterView& p) const;

  TransformerShape shape_;
  const ModelAxis& axis_;
  float norm_eps_ = 0;
  std::size_t heads_ = 0, kv_heads_ = 0, head_dim_ = 0, q_width_ = 0, kv_width_ = 0;
  bool replicated_kv_ = false;
  int kv_sharers_ = 1;
  std::vector<float> frequencies_;  // empty without rotary positions
  // The table for the longest sequence seen so far, never the whole context a config may claim.
  kernels::RotaryTable rotary_;
};

}  // namespace shardwise::train::transformer
