#pragma once
// A convolutional language model that is not the GPT, written against shardwise's public
// headers only: token embedding, then layers that each mix a position with the one before it
// (a causal convolution of width 2 as a ReLU MLP over [x_t, x_{t-1}], added to the residual
// stream), then an untied output head. It plugs into the training layer as a
// train::ModelDefinition, so the training job runs it on every layout: data parallel, ZeRO 1 to
// 3, tensor parallel (the MLP's first matrix column-parallel, its second row-parallel) and
// pipeline parallel.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <shardwise/train/model_definition.hpp>

namespace conv_lm {

struct ConvLmConfig {
  std::size_t n_layer = 4;
  std::size_t n_embd = 32;    // C
  std::size_t n_hidden = 64;  // F: the mixing MLP's width
  std::size_t context = 32;   // the longest sequence
  std::size_t vocab_size = 256;
};

class ConvLmDefinition final : public shardwise::train::ModelDefinition {
 public:
  explicit ConvLmDefinition(ConvLmConfig config);

  [[nodiscard]] std::string family() const override { return "conv-lm"; }
  [[nodiscard]] std::string config_json() const override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::size_t vocab_size() const override { return config_.vocab_size; }
  [[nodiscard]] std::size_t context_length() const override { return config_.context; }
  [[nodiscard]] std::size_t layers() const override { return config_.n_layer; }
  [[nodiscard]] std::vector<shardwise::train::ParameterSpec> parameters() const override;
  [[nodiscard]] std::vector<std::int64_t> parameter_layers() const override;
  [[nodiscard]] std::vector<std::string> chunk_parameters(
      const shardwise::train::LayerRange& range) const override;
  [[nodiscard]] std::vector<shardwise::PartitionSpec> model_placements(int degree) const override;
  [[nodiscard]] shardwise::ModelManifest manifest() const override;
  [[nodiscard]] std::vector<double> layer_flops(std::size_t seq) const override;
  [[nodiscard]] double head_flops() const override;
  void check_options(bool sequence_parallel, shardwise::Recompute recompute,
                     const std::string& field) const override;
  [[nodiscard]] std::unique_ptr<shardwise::train::ModelChunk> build_chunk(
      shardwise::train::ParameterStore& store,
      const shardwise::train::ChunkOptions& options) const override;

  [[nodiscard]] const ConvLmConfig& config() const { return config_; }

 private:
  ConvLmConfig config_;
};

}  // namespace conv_lm
