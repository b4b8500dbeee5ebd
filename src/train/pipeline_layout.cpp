#include "shardwise/train/pipeline_layout.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::train {

std::vector<LayerRange> virtual_stage_ranges(std::size_t total_layers,
                                             const PipelineLayout& pipeline, std::int64_t stages) {
  if (stages < 1 || pipeline.virtual_stages < 1 || stages > kMaxPipelineStages ||
      pipeline.virtual_stages > kMaxVirtualStages) {
    throw InvalidArgument("a pipeline of " + std::to_string(stages) + " stages x " +
                          std::to_string(pipeline.virtual_stages) + " model chunks");
  }
  const std::int64_t count = stages * pipeline.virtual_stages;
  std::vector<std::int64_t> layers = pipeline.layers;
  const auto total = static_cast<std::int64_t>(total_layers);
  if (layers.empty()) {
    if (count > total) {
      throw InvalidArgument(std::to_string(total) + " layers cannot fill " + std::to_string(count) +
                            " virtual pipeline stages (stages x " +
                            "model chunks); each needs at least one layer");
    }
    for (std::int64_t v = 0; v < count; ++v) layers.push_back(total / count + (v < total % count));
  }
  std::int64_t sum = 0;
  for (const std::int64_t n : layers) {
    if (n < 1 || n > total) {
      throw InvalidArgument("a virtual pipeline stage of " + std::to_string(n) + " layers");
    }
    sum += n;
  }
  if (static_cast<std::int64_t>(layers.size()) != count || sum != total) {
    throw InvalidArgument(std::to_string(layers.size()) + " virtual stages of " +
                          std::to_string(sum) + " layers for a pipeline of " +
                          std::to_string(count) + " virtual stages and a model of " +
                          std::to_string(total));
  }
  std::vector<LayerRange> ranges;
  std::size_t first = 0;
  for (const std::int64_t n : layers) {
    ranges.push_back({first, first + static_cast<std::size_t>(n)});
    first += static_cast<std::size_t>(n);
  }
  return ranges;
}

std::vector<LayerRange> stage_chunks(std::size_t total_layers, const PipelineLayout& pipeline,
                                     std::int64_t stages, std::int64_t stage) {
  const std::vector<LayerRange> all = virtual_stage_ranges(total_layers, pipeline, stages);
  std::vector<LayerRange> mine;
  for (std::int64_t k = 0; k < pipeline.virtual_stages; ++k) {
    mine.push_back(all[static_cast<std::size_t>(k * stages + stage)]);
  }
  return mine;
}

std::string to_string(const PipelineLayout& pipeline) {
  std::string text = to_string(pipeline.schedule) + "," + std::to_string(pipeline.microbatches) +
                     "," + std::to_string(pipeline.virtual_stages) + ",";
  for (const std::int64_t n : pipeline.layers) text += std::to_string(n) + "+";
  return text;
}

}  // namespace shardwise::train
