#pragma once
// Cost-balanced pipeline stages: contiguous groups of layers chosen to make the slowest stage
// as fast as possible, with the embedding on the first stage and the output head on the last.

#include <cstdint>
#include <vector>

namespace shardwise {

struct StageAssignment {
  std::vector<std::int64_t> layers_per_stage;
  // Index of each stage's first layer.
  std::vector<std::int64_t> first_layer;
  // Each stage's cost: its layers, plus the embedding on stage 0 and the head on the last.
  std::vector<double> stage_costs;
  [[nodiscard]] double max_stage_cost() const;
};

// Minimises the largest stage cost over every contiguous split of `layer_costs` into
// `num_stages` stages (among equally good splits, a fixed one is chosen). Every stage
// gets at least one layer unless allow_empty_stages. Throws InvalidArgument for num_stages < 1,
// a negative or non-finite cost, or too few layers.
StageAssignment assign_layers_by_cost(const std::vector<double>& layer_costs,
                                      std::int64_t num_stages, double embedding_cost = 0.0,
                                      double head_cost = 0.0, bool allow_empty_stages = false);

}  // namespace shardwise
