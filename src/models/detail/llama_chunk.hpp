#pragma once
// One chunk of the Llama's layers on one rank (train::ModelChunk): forward and backward of its
// micro-batches over this rank's blocks of the parameters, tensor and sequence parallel over the
// chunk options' model axis, with llm.c's layout of what forward keeps (one vector per kind,
// the chunk's layers side by side).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "shardwise/kernels/rotary.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models::detail {

class LlamaChunk final : public train::ModelChunk {
 public:
  // Takes its parameters from `store` (which holds at least the chunk's, split as
  // llama_model_placements says); InvalidArgument where a shape differs.
  LlamaChunk(LlamaConfig config, train::ParameterStore& store, const train::ChunkOptions& options);

  [[nodiscard]] std::size_t boundary_elements(std::size_t batch, std::size_t seq) const override;
  float forward(std::size_t slot, std::span<const std::int32_t> tokens,
                std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                std::span<const float> input, std::span<float> output,
                bool backward_follows) override;
  void backward(std::size_t slot, std::span<const float> output_grad, std::span<float> input_grad,
                float loss_scale, const train::GradientsReady& ready) override;
  [[nodiscard]] std::size_t activation_bytes() const override;

 private:
  struct Activations {
    std::size_t batch = 0;
    std::size_t seq = 0;
    bool head_held = false;  // forward left the head's units gathered for backward
    std::vector<std::int32_t> tokens, targets;
    std::vector<float> encoded, norm1, rstd1, q, k, v, atty, lse, residual2, norm2, rstd2, gate, up,
        act, residual3, normf, rstdf, losses;
    [[nodiscard]] std::size_t bytes() const;
  };
  // Layer l's arrays (l counted from the chunk's first layer); attproj and down are the one
  // projected_ scratch (the residual adds that read them need neither in backward).
  struct Layer {
    float *norm1, *rstd1, *q, *k, *v, *atty, *lse, *attproj, *residual2, *norm2, *rstd2, *gate, *up,
        *act, *down, *residual3;
  };
  Layer layer(Activations& a, std::size_t l);
  void size_activations(Activations& a, std::size_t batch, std::size_t seq);
  void size_layers(Activations& a, std::size_t layers, std::size_t batch, std::size_t seq) const;
  void size_scratch(std::size_t batch, std::size_t seq);
  [[nodiscard]] train::ChunkLimits limits() const;
  void layer_forward(const Layer& a, const float* residual, std::size_t l, std::size_t batch,
                     std::size_t seq);
  void layer_backward(const Layer& a, const float* residual, std::size_t l, std::size_t batch,
                      std::size_t seq);
  void head_backward(Activations& act, float loss_scale);
  void embedding_backward(Activations& act);
  // An RMSNorm of this rank's rows, whole in `out` (gathered along the sequence under sequence
  // parallelism); its backward adds into dinp (this rank's rows) and the weight's gradient
  // (summed over the model axis under sequence parallelism, each rank having its positions').
  void norm_forward(float* out, float* rstd, const float* inp, const float* weight,
                    std::size_t batch, std::size_t seq);
  void norm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, std::size_t batch, std::size_t seq);
  // A row-parallel product's output, this rank's rows (summed, or reduce-scattered).
  void row_parallel(float* out, const float* inp, const float* weight, std::size_t in_local,
                    std::size_t batch, std::size_t seq);
  // The gradient of an RMSNorm's output, whole (batch x seq x hidden): the projected_ scratch,
  // which holds the row-parallel outputs in forward and nothing in backward (the recomputing
  // forward of full recomputation writes it before its layer's backward begins).
  [[nodiscard]] float* dnorm() { return projected_.data(); }
  // dnorm() summed over the axis (this rank's rows of it under sequence parallelism).
  const float* column_input_grad(std::size_t batch, std::size_t seq);
  // A row-parallel layer's output gradient, whole.
  const float* whole_output_grad(const float* local, std::size_t batch, std::size_t seq);
  [[nodiscard]] float* value(std::size_t parameter) { return store_.value(index_[parameter]); }
  [[nodiscard]] float* grad(std::size_t parameter) { return store_.grad(index_[parameter]); }
  [[nodiscard]] std::size_t layers() const { return range_.end_layer - range_.first_layer; }
  [[nodiscard]] std::size_t local_rows(std::size_t batch, std::size_t seq) const;
  [[nodiscard]] std::size_t unit(std::size_t parameter) const {
    return store_.unit_of(index_[parameter]);
  }
  [[nodiscard]] std::size_t head_weight() const;
  void tell(const train::GradientsReady& ready, std::size_t first, std::size_t last) const;
  Activations& slot(std::size_t index);

  LlamaConfig config_;
  train::LayerRange range_;
  bool has_head_ = false;
  train::ParameterStore& store_;
  train::TensorParallel tp_;
  bool sequence_parallel_ = false;
  Recompute recompute_ = Recompute::kNone;
  // This rank's widths: query heads and their channels, key/value heads and channels, the MLP's
  // width, the vocabulary and where its rows start; the first key/value head it computes with
  // (of the whole projection's, where replicated).
  std::size_t heads_ = 0, q_width_ = 0, kv_heads_ = 0, kv_width_ = 0, mlp_ = 0, vocab_ = 0,
              vocab_start_ = 0;
  int kv_sharers_ = 1;  // the model ranks holding this rank's key/value head
  bool replicated_kv_ = false;
  // The rotary table for the longest sequence seen so far (never the whole context a config
  // may claim: its cos and sin are as many floats as one sequence's q).
  [[nodiscard]] const kernels::RotaryTable& rotary(std::size_t seq);
  std::vector<float> frequencies_;
  kernels::RotaryTable rotary_;
  std::vector<std::size_t> index_;  // store index of each parameter (llama_parameters order)
  std::vector<std::unique_ptr<Activations>> slots_;
  Activations recomputed_;  // full recomputation's one layer
  std::size_t scratch_batch_ = 0, scratch_seq_ = 0;
  // Whether the attention's gradients (attention's output's and q's in the layer's gate, k's and
  // v's in its up) fit the MLP's arrays, dead once the backward has passed the MLP.
  [[nodiscard]] bool attention_grads_in_mlp() const;
  // The backward's scratch. The MLP's gradients are written over the arrays they are the
  // gradients of, the attention's into the MLP's arrays where they fit (else dq_, dk_, dv_ and
  // datty_ hold them), the head's logits' gradient over its logits.
  std::vector<float> dresidual_, projected_, dq_, dk_, dv_, datty_, logits_, probs_, dnorm_local_,
      norm_local_, partial_, dfull_, norm_grad_, kv_grad_;
};

}  // namespace shardwise::models::detail
