#pragma once
// Every valid layout of a training setup on a cluster, evaluated and ranked: those that fit by
// predicted step time, each with why it lost to the best; where none fits, the smallest first.

#include <cstddef>
#include <string>
#include <vector>

#include "shardwise/plan/cost_model.hpp"

namespace shardwise::plan {

struct SearchOptions {
  std::size_t top = 5;
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;  // where the model axis is larger than 1
  // Tensor parallelism stays inside a node (across nodes it is never the faster choice).
  bool model_within_node = true;
};

struct RankedLayout {
  Prediction prediction;
  // Against the best: "" for the best itself, else the largest difference in words.
  std::string why_not_best;
};

struct SearchResult {
  std::vector<RankedLayout> ranked;  // at most `top`, best first
  std::size_t evaluated = 0;         // valid layouts
  std::size_t fitting = 0;
  // The first reason a valid layout could not be evaluated (its bytes beyond what the planner
  // counts), if any was skipped.
  std::string skipped;
};

SearchResult search_layouts(const ModelShape& model, const Cluster& cluster,
                            const TrainingSetup& setup, const SearchOptions& options);

}  // namespace shardwise::plan
