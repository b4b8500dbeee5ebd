#include "shardwise/strategy/pipeline_balance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise {

double StageAssignment::max_stage_cost() const {
  return stage_costs.empty() ? 0.0 : *std::max_element(stage_costs.begin(), stage_costs.end());
}

StageAssignment assign_layers_by_cost(const std::vector<double>& layer_costs,
                                      std::int64_t num_stages, double embedding_cost,
                                      double head_cost, bool allow_empty_stages) {
  if (num_stages < 1) {
    throw InvalidArgument("num_stages is " + std::to_string(num_stages) + "; expected at least 1");
  }
  const auto check_cost = [](double cost, const std::string& what) {
    if (!std::isfinite(cost) || cost < 0) {
      throw InvalidArgument(what + " is " + std::to_string(cost) + "; expected a finite cost >= 0");
    }
  };
  check_cost(embedding_cost, "embedding_cost");
  check_cost(head_cost, "head_cost");
  for (std::size_t i = 0; i < layer_costs.size(); ++i) {
    check_cost(layer_costs[i], "cost of layer " + std::to_string(i));
  }
  const auto layers = static_cast<std::int64_t>(layer_costs.size());
  const auto stages = static_cast<std::size_t>(num_stages);
  if (layers < num_stages && !allow_empty_stages) {
    throw InvalidArgument(std::to_string(layers) + " layers cannot fill " +
                          std::to_string(num_stages) +
                          " pipeline stages; use fewer stages or allow empty stages");
  }
  std::vector<double> prefix(layer_costs.size() + 1, 0.0);
  for (std::size_t i = 0; i < layer_costs.size(); ++i) prefix[i + 1] = prefix[i] + layer_costs[i];
  const auto n = static_cast<std::size_t>(layers);
  const std::size_t min_layers = allow_empty_stages ? 0 : 1;
  auto stage_cost = [&](std::size_t stage, std::size_t begin, std::size_t end) {
    double cost = prefix[end] - prefix[begin];
    if (stage == 0) cost += embedding_cost;
    if (stage + 1 == stages) cost += head_cost;
    return cost;
  };
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  // best[s][i]: the smallest largest cost of stages 0..s holding layers [0, i).
  std::vector<std::vector<double>> best(stages, std::vector<double>(n + 1, kInfinity));
  std::vector<std::vector<std::size_t>> split(stages, std::vector<std::size_t>(n + 1, 0));
  for (std::size_t i = min_layers; i <= n; ++i) best[0][i] = stage_cost(0, 0, i);
  for (std::size_t s = 1; s < stages; ++s) {
    for (std::size_t i = 0; i <= n; ++i) {
      for (std::size_t j = 0; j + min_layers <= i; ++j) {
        const double candidate = std::max(best[s - 1][j], stage_cost(s, j, i));
        // Strictly better only: among equal splits the earliest j (shorter early stages) wins.
        if (candidate < best[s][i]) {
          best[s][i] = candidate;
          split[s][i] = j;
        }
      }
    }
  }
  StageAssignment out;
  out.layers_per_stage.assign(stages, 0);
  out.first_layer.assign(stages, 0);
  out.stage_costs.assign(stages, 0.0);
  std::size_t end = n;
  for (std::size_t s = stages; s-- > 0;) {
    const std::size_t begin = s == 0 ? 0 : split[s][end];
    out.layers_per_stage[s] = static_cast<std::int64_t>(end - begin);
    out.first_layer[s] = static_cast<std::int64_t>(begin);
    out.stage_costs[s] = stage_cost(s, begin, end);
    end = begin;
  }
  return out;
}

}  // namespace shardwise
