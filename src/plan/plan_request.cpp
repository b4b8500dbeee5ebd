#include "shardwise/plan/plan_request.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"

namespace shardwise::plan {

Layout complete_layout(Layout layout, const ModelShape& model, const TrainingSetup& setup) {
  if (layout.microbatches == 0) {
    const std::int64_t per_step = layout.data_parallel() * setup.micro_batch;
    layout.microbatches =
        std::max<std::int64_t>(1, setup.global_batch / std::max<std::int64_t>(1, per_step));
  }
  const std::int64_t chunks = layout.pipeline * layout.virtual_stages;
  if (layout.stage_layers.empty() && layout.pipeline > 1 && chunks <= model.layers &&
      model.layers % chunks != 0) {
    // What the trainer runs: an even split, the earlier stages taking one more.
    layout.stage_layers = PipelineParallelStrategy(chunks).assign_layers_to_stages(model.layers);
  }
  return layout;
}

void check_setup(const ModelShape& model, const TrainingSetup& setup, const std::string& seq_name) {
  if (model.context > 0 && setup.seq > model.context) {
    throw InvalidArgument(
        seq_name + " " + std::to_string(setup.seq) + " is longer than the model's context of " +
        std::to_string(model.context) + " positions (the rows of its position embedding)");
  }
}

SearchResult search_ranked(const ModelShape& model, const Cluster& cluster,
                           const TrainingSetup& setup, const SearchOptions& options,
                           const std::string& batch_name) {
  SearchResult result = search_layouts(model, cluster, setup, options);
  if (result.ranked.empty() && !result.skipped.empty()) {
    throw InvalidArgument("no layout can be evaluated: " + result.skipped);
  }
  if (result.ranked.empty()) {
    throw InvalidArgument("no layout of " + std::to_string(cluster.devices) +
                          " devices divides the model and the batch (heads " +
                          std::to_string(model.heads) + ", layers " + std::to_string(model.layers) +
                          ", " + batch_name + " " + std::to_string(setup.global_batch) + ")");
  }
  return result;
}

}  // namespace shardwise::plan
