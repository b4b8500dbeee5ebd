#pragma once
// A GPT-2-style decoder as nanoGPT defines it: token and learned position embeddings, pre-norm
// blocks (LayerNorm with bias, causal multi-head attention with biases, a GELU (tanh) MLP of
// 4x the width), a final LayerNorm and an output head tied to the token embedding; fp32,
// forward and backward on the CPU. Its parameters live in a train::ParameterStore under
// nanoGPT's names.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/core/partition_spec.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/pipeline_layout.hpp"
#include "shardwise/train/transformer_spec.hpp"

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

// The GPT as the training layer's transformer assembles it: learned positions, LayerNorms, a
// stacked Q, K and V with biases, biases on every matrix, a GELU MLP of 4 n_embd, the head tied
// to the token embedding.
[[nodiscard]] train::TransformerSpec gpt_transformer(const GptConfig& config);

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
      std::size_t capacity, Precision precision) const override;

 private:
  GptConfig config_;
};

}  // namespace shardwise::models
