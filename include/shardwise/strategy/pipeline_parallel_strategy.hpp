#pragma once
// Pipeline parallelism: contiguous groups of layers on consecutive stages. Tensors are not
// split (a stage holds its layers whole); activations flow forward, gradients backward.

#include <cstdint>
#include <utility>
#include <vector>

#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

class PipelineParallelStrategy final : public ShardingStrategy {
 public:
  // Throws InvalidArgument for num_stages < 1.
  explicit PipelineParallelStrategy(std::int64_t num_stages, std::string axis_name = "pipeline",
                                    std::optional<int> mesh_axis = std::nullopt);

  [[nodiscard]] StrategyKind kind() const override { return StrategyKind::kPipelineParallel; }
  [[nodiscard]] std::int64_t num_stages() const { return num_stages_; }

  // Layers per stage: floor(L / stages) each, the remainder one by one to the first stages
  // (12 on 4 -> [3, 3, 3, 3]; 10 on 4 -> [3, 3, 2, 2]). Fewer layers than stages is an error
  // unless allow_empty_stages.
  [[nodiscard]] std::vector<std::int64_t> assign_layers_to_stages(
      std::int64_t num_layers, bool allow_empty_stages = false) const;

  // None: pipeline parallelism places layers, not tensor slices, so specs are replicated.
  [[nodiscard]] std::vector<AxisClaim> axis_claims() const override;
  [[nodiscard]] NamedSharding apply_sharding(const Shape& shape, const Mesh& mesh) const override;
  using ShardingStrategy::apply_sharding;

  // Activations: (0, 1), (1, 2), ...; gradients: (1, 0), (2, 1), ...
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>>
  get_forward_communication_pattern() const;
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::int64_t>>
  get_backward_communication_pattern() const;

 private:
  std::int64_t num_stages_;
};

}  // namespace shardwise
