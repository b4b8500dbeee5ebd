#pragma once
// A GPT-2-style decoder as nanoGPT defines it: token and learned position embeddings, pre-norm
// blocks (LayerNorm with bias, causal multi-head attention with biases, a GELU (tanh) MLP of
// 4x the width), a final LayerNorm and an output head tied to the token embedding; fp32,
// forward and backward on the CPU. Its parameters live in a train::ParameterStore under
// nanoGPT's names.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/strategy/recompute.hpp"
#include "shardwise/train/chunk_inputs.hpp"
#include "shardwise/train/distributed_model.hpp"
#include "shardwise/train/head_blocks.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/pipeline_executor.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/tensor_parallel.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::models {

struct GptConfig {
  std::size_t n_layer = 4;
  std::size_t n_head = 4;
  std::size_t n_embd = 128;
  std::size_t block_size = 64;   // the longest sequence
  std::size_t vocab_size = 256;  // byte tokens

  friend bool operator==(const GptConfig&, const GptConfig&) = default;
};

// "tiny" (nanoGPT's CPU configuration), "small" (shakespeare-char) or "gpt2"; anything else is
// an InvalidArgument naming `field` and the value.
[[nodiscard]] GptConfig gpt_preset(const std::string& name, const std::string& field);
// Checks the sizes (positive, n_embd divisible by n_head, bounded); an InvalidArgument names
// the field and the value.
void validate(const GptConfig& config);

// The model's parameters as a manifest, exactly as the trainer holds them (names, (out, in)
// shapes, the stacked (3, C, C) Q, K and V, declared logical axes, fp32) with its head size as
// the "heads" axis unit: what `shardwise plan` and `shardwise specs` read, so that both count
// the parameters, blocks and ZeRO chunks the trainer has.
[[nodiscard]] ModelManifest gpt_manifest(const GptConfig& config);

// The parameters in nanoGPT's order, names and initialisation (normal(0, 0.02), residual
// projections scaled by 1/sqrt(2 n_layer), biases zero, LayerNorm weights one); weight decay on
// the matrices and embeddings only.
[[nodiscard]] std::vector<train::ParameterSpec> gpt_parameters(const GptConfig& config);

// The split over the model axis the GPT's layers compute with (Megatron-LM's): Q, K and V and
// the MLP's first layer column-parallel with whole heads per rank, the attention's output and
// the MLP's second layer row-parallel, the token embedding (and the tied head) split by
// vocabulary; everything else whole. P() for every parameter where `degree` is 1. An
// InvalidArgument names the sizes a degree above 1 does not divide (heads, the MLP's width,
// the vocabulary).
[[nodiscard]] std::vector<PartitionSpec> gpt_model_placements(const GptConfig& config, int degree);

// The part of the GPT one pipeline stage (or one of its model chunks) runs: layers
// [first_layer, end_layer), led by the embeddings where first_layer is 0 and closed by the final
// LayerNorm, the tied head and the loss where end_layer is n_layer. Between stages passes the
// residual stream (this rank's rows of it under sequence parallelism).
using GptStageRange = train::LayerRange;

// gpt_parameters' names a stage holds: the token embedding where it has the embeddings or the
// head (the head is tied to it), the position embedding with the embeddings, its layers' and,
// with the head, the final LayerNorm's. An InvalidArgument names a range outside the model or
// an empty one.
[[nodiscard]] std::vector<train::ParameterSpec> gpt_stage_parameters(const GptConfig& config,
                                                                     const GptStageRange& range);

// What a layer keeps for backward: shardwise::Recompute (strategy/recompute.hpp). The attention
// kernel never keeps its seq x seq weights (it recomputes them tile by tile in backward), so
// kNone and kSelective keep the same bytes; kFull runs each layer's forward again in its
// backward, into one layer's scratch shared by every micro-batch; under ZeRO-3 the layer is
// gathered once in backward for both.

// The head computes a block of rows at a time (train/head_blocks.hpp).

class Gpt final : public train::ModelChunk {
 public:
  // Takes the parameters from `store` (laid out by gpt_parameters(config), or holding at least
  // those of `range`); activations are sized on the first forward of each batch shape.
  // Over `tensor_parallel`'s model axis, the store holding this rank's blocks
  // (train::rank_parameters); degree 1: the whole model.
  // With sequence_parallel (tensor parallelism only), the residual stream, the LayerNorms and
  // the row-parallel outputs hold this rank's positions of each sequence (Korthikanti et al.
  // 2022); a batch's sequence length must then divide by the degree.
  // `range` (default: the whole model) is the stage this object runs.
  Gpt(GptConfig config, train::ParameterStore& store,
      train::TensorParallel tensor_parallel = train::TensorParallel(),
      bool sequence_parallel = false, std::optional<GptStageRange> range = std::nullopt);

  [[nodiscard]] const GptConfig& config() const { return config_; }
  [[nodiscard]] const GptStageRange& range() const { return range_; }

  // The whole model (its range must be whole): the mean cross-entropy of predicting
  // targets[b, t] from tokens[b, 0..t]; tokens and targets are (batch, seq) with
  // seq <= block_size and every token < vocab_size (InvalidArgument otherwise). Keeps what
  // backward needs. Each parameter unit is gathered just before its use and released after (see
  // ParameterStore); where backward_follows, the final norm and the embeddings stay gathered for
  // backward, which must then come next.
  float forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                std::size_t batch, std::size_t seq, bool backward_follows = false);

  // Adds d(mean loss of the last forward) / d(parameters) into the store's gradients, telling
  // `ready` of each parameter range once its gradients are final: the final LayerNorm, each
  // block from the last to the first, then the embeddings (the token embedding also receives
  // the tied head's gradient, so it is final only at the end).
  void backward(const train::GradientsReady& ready = {});

  // Floats of the residual stream a stage receives and passes on for a micro-batch of `batch`
  // sequences of `seq` tokens: this rank's rows (all of them, or its positions under sequence
  // parallelism) x n_embd.
  [[nodiscard]] std::size_t boundary_elements(std::size_t batch, std::size_t seq) const override;

  // The stage's forward of one micro-batch, its activations kept in `slot` (one per micro-batch
  // in flight) until its backward. The first stage reads `tokens`, later ones `input`
  // (boundary_elements); the last reads `targets` and returns the micro-batch's mean loss, the
  // others write `output` and return 0.
  float forward_stage(std::size_t slot, std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                      std::span<const float> input, std::span<float> output,
                      bool backward_follows = false);

  // The stage's backward of the micro-batch in `slot`, adding into the store's gradients: the
  // last stage starts from its loss, weighted by `loss_scale` (1 / micro-batches: the step's
  // loss is their mean), the others from `output_grad`; every stage but the first writes the
  // gradient of its input to `input_grad`. `ready` as for backward().
  void backward_stage(std::size_t slot, std::span<const float> output_grad,
                      std::span<float> input_grad, float loss_scale = 1.0F,
                      const train::GradientsReady& ready = {});

  // Bytes of the activations kept for backward (every slot) and of the gradients' scratch.
  [[nodiscard]] std::size_t activation_bytes() const override;

  // The chunk as the training layer drives it: forward_stage and backward_stage.
  float forward(std::size_t slot, std::span<const std::int32_t> tokens,
                std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                std::span<const float> input, std::span<float> output,
                bool backward_follows) override {
    return forward_stage(slot, tokens, targets, batch, seq, input, output, backward_follows);
  }
  void backward(std::size_t slot, std::span<const float> output_grad, std::span<float> input_grad,
                float loss_scale, const train::GradientsReady& ready) override {
    backward_stage(slot, output_grad, input_grad, loss_scale, ready);
  }

  // What the layers keep for backward; set before the first forward (InvalidArgument after).
  void set_recompute(Recompute recompute);
  [[nodiscard]] Recompute recompute() const { return recompute_; }

 private:
  // What one micro-batch's forward keeps for its backward (llm.c's layout: one vector per kind,
  // the stage's layers side by side).
  struct Activations {
    std::size_t batch = 0;
    std::size_t seq = 0;
    bool head_held = false;  // forward left the final norm and the embeddings gathered
    std::vector<std::int32_t> tokens, targets;
    std::vector<float> encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, residual2, ln2, ln2_mean,
        ln2_rstd, fch, fch_gelu, residual3, lnf, lnf_mean, lnf_rstd, losses;
    [[nodiscard]] std::size_t bytes() const;
  };
  // Layer l's saved activations in `a` (l counted from the stage's first layer). The two
  // row-parallel outputs (attproj, fcproj) are not saved: backward of the residual add that
  // reads them needs neither, so both are the one projected_ scratch.
  struct LayerActivations {
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *lse, *attproj, *residual2, *ln2, *ln2_mean,
        *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3;
  };
  // Under full recomputation every layer's arrays but its output are the shared scratch's.
  LayerActivations layer(Activations& a, std::size_t l);
  // Layer l's forward (l counted in the whole model) from `residual`, into `a`.
  void layer_forward(const LayerActivations& a, const float* residual, std::size_t l,
                     std::size_t batch, std::size_t seq);
  // A LayerNorm over this rank's rows of the residual stream, whole in `out` (gathered along
  // the sequence under sequence parallelism).
  void norm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                    const float* bias, std::size_t batch, std::size_t seq);
  // The same LayerNorm of sum = a + b, which it also writes (the residual add fused into it).
  void residual_norm_forward(float* sum, float* out, float* mean, float* rstd, const float* a,
                             const float* b, const float* weight, const float* bias,
                             std::size_t batch, std::size_t seq);
  // A row-parallel layer's output, this rank's rows: summed over the model axis (reduce-
  // scattered along the sequence under sequence parallelism), then its bias added once.
  void row_parallel(float* out, const float* inp, const float* weight, const float* bias,
                    std::size_t in_local, std::size_t batch, std::size_t seq);
  // Parameter `which` (detail::LayerParam) of layer `layer`, as the store holds it now.
  [[nodiscard]] float* param(std::size_t layer, std::size_t which);
  [[nodiscard]] std::size_t layers() const { return range_.end_layer - range_.first_layer; }
  [[nodiscard]] std::size_t embeddings_unit() const;
  [[nodiscard]] std::size_t layer_unit(std::size_t l) const;
  [[nodiscard]] std::size_t final_norm_unit() const;
  Activations& slot(std::size_t index);
  void size_activations(Activations& a, std::size_t batch, std::size_t seq);
  // The arrays of `layers` layers (all but their outputs, residual3).
  void size_layers(Activations& a, std::size_t layers, std::size_t batch, std::size_t seq) const;
  void size_scratch(std::size_t batch, std::size_t seq);
  [[nodiscard]] train::ChunkLimits limits() const;

  GptConfig config_;
  GptStageRange range_;
  bool has_head_ = false;
  train::ParameterStore& store_;
  train::TensorParallel tp_;
  // This rank's widths: attention channels and heads, the MLP's width, the vocabulary and where
  // its rows start.
  std::size_t channels_ = 0, heads_ = 0, width_ = 0, vocab_ = 0, vocab_start_ = 0;
  bool sequence_parallel_ = false;
  // Rows of the residual stream this rank holds: batch x seq, or its positions' under
  // sequence parallelism.
  [[nodiscard]] std::size_t local_rows(std::size_t batch, std::size_t seq) const;
  // Store index of each parameter, in gpt_parameters order (kNotHeld for another stage's).
  std::vector<std::size_t> index_;
  std::vector<std::unique_ptr<Activations>> slots_;
  Recompute recompute_ = Recompute::kNone;
  // Full recomputation's one layer of activations (its output excepted), shared by the slots.
  Activations recomputed_;
  // The shape the gradient scratch is sized for.
  std::size_t scratch_batch_ = 0, scratch_seq_ = 0;
  // Gradient scratch, reused layer by layer and micro-batch by micro-batch.
  std::vector<float> dresidual_, dbranch_, dwide_, dwide_gelu_, dnorm_, dqkv_, dlogits_;
  // A row-parallel layer's output (this rank's rows) until the residual add has read it.
  std::vector<float> projected_;
  // One block of rows' logits and probabilities (the head's, forward and backward).
  std::vector<float> logits_, probs_;
  // A column-parallel layer's input gradient, this rank's rows, under sequence parallelism (the
  // sum's part; dnorm_ itself otherwise, and this stays empty).
  std::vector<float> dnorm_local_;
  // Sequence parallelism's scratch: a LayerNorm's rows before they are gathered, a row-parallel
  // product before it is reduce-scattered, and an output gradient gathered.
  std::vector<float> norm_local_, partial_, dfull_;
};

// How the GPT is pipelined over the context's pipeline axis (the training layer's layout).
using GptPipeline = train::PipelineLayout;

// The GPT as the training layer builds it on any layout (train/model_definition.hpp): the
// family "gpt" of the registry (models/model_registry.hpp).
class GptDefinition final : public train::ModelDefinition {
 public:
  explicit GptDefinition(const GptConfig& config);

  [[nodiscard]] const GptConfig& config() const { return config_; }
  [[nodiscard]] std::string family() const override { return "gpt"; }
  [[nodiscard]] std::string config_json() const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string describe_config(const std::string& config_json) const override;
  [[nodiscard]] std::size_t vocab_size() const override { return config_.vocab_size; }
  [[nodiscard]] std::size_t context_length() const override { return config_.block_size; }
  [[nodiscard]] std::size_t layers() const override { return config_.n_layer; }
  [[nodiscard]] std::vector<train::ParameterSpec> parameters() const override;
  [[nodiscard]] std::vector<std::int64_t> parameter_layers() const override;
  [[nodiscard]] std::vector<std::string> chunk_parameters(
      const train::LayerRange& range) const override;
  [[nodiscard]] std::vector<PartitionSpec> model_placements(int degree) const override;
  [[nodiscard]] ModelManifest manifest() const override;
  // Per layer 24 C^2 (its matrix products) + 4 seq C (attention); the head 2 V C.
  [[nodiscard]] std::vector<double> layer_flops(std::size_t seq) const override;
  [[nodiscard]] double head_flops() const override;
  [[nodiscard]] std::unique_ptr<train::ModelChunk> build_chunk(
      train::ParameterStore& store, const train::ChunkOptions& options) const override;
  [[nodiscard]] bool decodes() const override { return true; }
  [[nodiscard]] std::unique_ptr<train::Decoder> build_decoder(
      train::ParameterStore& store, const train::TensorParallel& tensor_parallel,
      std::size_t capacity) const override;

 private:
  GptConfig config_;
};

// The GPT as the trainer sees it: a DistributedModel of a GptDefinition.
class GptModel final : public train::DistributedModel {
 public:
  // One rank: the whole model.
  GptModel(const GptConfig& config, std::uint64_t seed);
  // This rank's part of the model on `context`: its blocks of the parameters split over the
  // model axis as `placements` say (gpt_model_placements where not given), initialised from the
  // whole model's values; with `pipeline`, only this stage's chunks and their parameters.
  GptModel(const GptConfig& config, std::uint64_t seed, const train::ParallelContext& context,
           const std::optional<std::vector<PartitionSpec>>& placements = std::nullopt,
           bool sequence_parallel = false, std::optional<GptPipeline> pipeline = std::nullopt);

  // The first of this rank's model chunks (the whole model without a pipeline).
  [[nodiscard]] Gpt& gpt() { return static_cast<Gpt&>(chunk(0)); }
  // What every chunk's layers keep for backward (before the first step).
  void set_recompute(Recompute recompute);
};

}  // namespace shardwise::models
