#pragma once
// One planning question as `shardwise plan` and the Python package ask it: a layout completed
// as the trainer would run it, the setup checked against the model, and a search that says why
// it found nothing. One path for both, so that they answer alike.

#include <cstdint>
#include <string>

#include "shardwise/plan/cluster.hpp"
#include "shardwise/plan/layout.hpp"
#include "shardwise/plan/model_shape.hpp"
#include "shardwise/plan/search.hpp"

namespace shardwise::plan {

// `layout` with what it leaves out filled in as `shardwise train` runs it: microbatches (0: not
// given) become the batch's, global_batch / (data x fsdp x micro_batch) and at least 1, and a
// pipeline whose layers do not split evenly over pipeline x virtual_stages chunks gets the
// trainer's split (the earlier stages taking one more) unless stage_layers is given.
Layout complete_layout(Layout layout, const ModelShape& model, const TrainingSetup& setup);

// InvalidArgument where the setup's sequence is longer than the model's context (the rows of
// its position embedding): "<seq_name> 4096 is longer than the model's context of 1024
// positions (...)".
void check_setup(const ModelShape& model, const TrainingSetup& setup, const std::string& seq_name);

// search_layouts, and InvalidArgument saying why where it ranks nothing: no layout could be
// evaluated (the first reason), or no layout of the cluster's devices divides the model and the
// batch (naming heads, layers and `batch_name` with the batch).
SearchResult search_ranked(const ModelShape& model, const Cluster& cluster,
                           const TrainingSetup& setup, const SearchOptions& options,
                           const std::string& batch_name);

}  // namespace shardwise::plan
