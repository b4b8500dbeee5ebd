#pragma once
// How a model's repeated layers are pipelined over a mesh's pipeline axis, for any model: the
// schedule, its micro-batches, each rank's model chunks (virtual stages) and the layers of each
// virtual stage. Virtual stage k * stages + s runs on pipeline rank s, as the strategies'
// interleaved schedule places it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/strategy/pipeline_schedule.hpp"

namespace shardwise::train {

// Layers [first_layer, end_layer) of a model's repeated layers: what one model chunk runs (the
// whole model without a pipeline). The chunk with the first layer also runs what comes before
// the layers (embeddings); the chunk with the last, what comes after (the head and the loss).
struct LayerRange {
  std::size_t first_layer = 0;
  std::size_t end_layer = 0;

  [[nodiscard]] bool has_first() const { return first_layer == 0; }
  [[nodiscard]] bool has_last(std::size_t layers) const { return end_layer == layers; }
  [[nodiscard]] std::size_t size() const { return end_layer - first_layer; }
  friend bool operator==(const LayerRange&, const LayerRange&) = default;
};

struct PipelineLayout {
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  std::int64_t microbatches = 1;    // per step on each data-parallel rank
  std::int64_t virtual_stages = 1;  // model chunks per pipeline rank
  // The layers of each virtual stage in order; empty: as even as possible, the earlier stages
  // taking one more.
  std::vector<std::int64_t> layers;

  friend bool operator==(const PipelineLayout&, const PipelineLayout&) = default;
};

// Every virtual stage's layers over `stages` pipeline ranks of a model of `total_layers`: an
// InvalidArgument names a split that leaves a stage without a layer or does not add up.
[[nodiscard]] std::vector<LayerRange> virtual_stage_ranges(std::size_t total_layers,
                                                           const PipelineLayout& pipeline,
                                                           std::int64_t stages);

// The chunks pipeline rank `stage` runs, in its chunk order (virtual stages k * stages + stage).
[[nodiscard]] std::vector<LayerRange> stage_chunks(std::size_t total_layers,
                                                   const PipelineLayout& pipeline,
                                                   std::int64_t stages, std::int64_t stage);

// The layout in one line, for ranks to compare and logs to keep: "1f1b,4,1,2+2+".
[[nodiscard]] std::string to_string(const PipelineLayout& pipeline);

}  // namespace shardwise::train
