#pragma once
// The GPT as the tests drive it, built by the library as any job builds it: GptChunk runs one
// chunk of a models::GptDefinition on a store (slot 0 for the whole model's forward and
// backward), GptModel is a train::DistributedModel of it on a context.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/distributed_model.hpp"

namespace shardwise::testing {

class GptChunk {
 public:
  GptChunk(const models::GptConfig& config, train::ParameterStore& store,
           train::TensorParallel tensor_parallel = train::TensorParallel(),
           bool sequence_parallel = false, std::optional<train::LayerRange> range = std::nullopt,
           Recompute recompute = Recompute::kNone)
      : range_(range.value_or(train::LayerRange{0, config.n_layer})), whole_(config.n_layer) {
    train::ChunkOptions options;
    options.range = range_;
    options.tensor_parallel = tensor_parallel;
    options.sequence_parallel = sequence_parallel;
    options.recompute = recompute;
    chunk_ = models::GptDefinition(config).build_chunk(store, options);
  }

  // The whole model's mean loss (the chunk's range must be whole).
  float forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                std::size_t batch, std::size_t seq, bool backward_follows = false) {
    if (!(range_ == train::LayerRange{0, whole_})) {
      throw InvalidArgument("forward() runs the whole model; this chunk runs layers " +
                            std::to_string(range_.first_layer) + " to " +
                            std::to_string(range_.end_layer));
    }
    return chunk_->forward(0, tokens, targets, batch, seq, {}, {}, backward_follows);
  }
  void backward(const train::GradientsReady& ready = {}) {
    chunk_->backward(0, {}, {}, 1.0F, ready);
  }
  float forward_stage(std::size_t slot, std::span<const std::int32_t> tokens,
                      std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                      std::span<const float> input, std::span<float> output,
                      bool backward_follows = false) {
    return chunk_->forward(slot, tokens, targets, batch, seq, input, output, backward_follows);
  }
  void backward_stage(std::size_t slot, std::span<const float> output_grad,
                      std::span<float> input_grad, float loss_scale = 1.0F,
                      const train::GradientsReady& ready = {}) {
    chunk_->backward(slot, output_grad, input_grad, loss_scale, ready);
  }
  [[nodiscard]] std::size_t boundary_elements(std::size_t batch, std::size_t seq) const {
    return chunk_->boundary_elements(batch, seq);
  }
  [[nodiscard]] std::size_t activation_bytes() const { return chunk_->activation_bytes(); }
  [[nodiscard]] train::ModelChunk& chunk() { return *chunk_; }

 private:
  train::LayerRange range_;
  std::size_t whole_;
  std::unique_ptr<train::ModelChunk> chunk_;
};

class GptModel final : public train::DistributedModel {
 public:
  GptModel(const models::GptConfig& config, std::uint64_t seed)
      : DistributedModel(std::make_shared<models::GptDefinition>(config), seed) {}
  GptModel(const models::GptConfig& config, std::uint64_t seed,
           const train::ParallelContext& context,
           const std::optional<std::vector<PartitionSpec>>& placements = std::nullopt,
           bool sequence_parallel = false,
           std::optional<train::PipelineLayout> pipeline = std::nullopt)
      : DistributedModel(std::make_shared<models::GptDefinition>(config), seed, context,
                         {placements.value_or(std::vector<PartitionSpec>{}), sequence_parallel,
                          Recompute::kNone, std::move(pipeline)}) {}

  // The whole model's forward of one micro-batch (no pipeline).
  float forward(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets,
                std::size_t batch, std::size_t seq, bool backward_follows = false) {
    return chunk(0).forward(0, tokens, targets, batch, seq, {}, {}, backward_follows);
  }
};

}  // namespace shardwise::testing
