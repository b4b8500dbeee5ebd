#pragma once
// Tensor (Megatron) parallelism: linear layers split over the axis. Column-parallel layers
// (attention QKV, MLP up/gate) split their output features; row-parallel layers (attention
// output, MLP down) split their input features. Which weight dimension that is depends on the
// layout, which shardwise makes explicit.

#include <optional>
#include <string>

#include "shardwise/strategy/sharding_strategy.hpp"

namespace shardwise {

enum class WeightLayout {
  kOutIn,  // PyTorch nn.Linear: weight is (out_features, in_features)
  kInOut,  // Flax Dense, GPT-2 Conv1D: kernel is (in_features, out_features)
};

enum class LinearKind { kColumnParallel, kRowParallel };

class TensorParallelStrategy final : public ShardingStrategy {
 public:
  // shard_dimension: "in_features", "out_features" or none (then specs shard "hidden").
  // Throws InvalidArgument for any other name.
  explicit TensorParallelStrategy(std::string axis_name = "model",
                                  std::optional<int> mesh_axis = std::nullopt,
                                  std::optional<std::string> shard_dimension = std::nullopt,
                                  WeightLayout layout = WeightLayout::kOutIn);

  [[nodiscard]] StrategyKind kind() const override { return StrategyKind::kTensorParallel; }
  [[nodiscard]] const std::optional<std::string>& shard_dimension() const {
    return shard_dimension_;
  }
  [[nodiscard]] WeightLayout layout() const { return layout_; }

  // The dimension named shard_dimension (or "hidden" without one) over the axis, and the
  // dimensions Megatron-LM splits in every layout: "vocab", "heads", "kv_heads", "mlp"; and a
  // Mixture of Experts' "experts", folded over the axis whole after an expert axis (Megatron-LM's
  // parallel folding, expert tensor parallelism 1).
  [[nodiscard]] std::vector<AxisClaim> axis_claims() const override;

  // A 2-D linear weight in this layout with shard_dimension split: with the default (out, in)
  // layout, "in_features" gives P(None, axis) and anything else P(axis, None), as the reference.
  [[nodiscard]] PartitionSpec get_linear_weight_spec() const;
  // A 2-D linear weight of the given kind in this layout.
  [[nodiscard]] PartitionSpec get_linear_weight_spec(LinearKind kind) const;
  // Column-parallel: (out, in) -> P(axis, None); (in, out) -> P(None, axis).
  [[nodiscard]] PartitionSpec get_attention_qkv_spec() const;
  // Row-parallel: (out, in) -> P(None, axis); (in, out) -> P(axis, None).
  [[nodiscard]] PartitionSpec get_attention_output_spec() const;

  // 2-D arrays as get_linear_weight_spec(); other ranks split their last dimension.
  [[nodiscard]] NamedSharding apply_sharding(const Shape& shape, const Mesh& mesh) const override;
  using ShardingStrategy::apply_sharding;

 private:
  std::optional<std::string> shard_dimension_;
  WeightLayout layout_;
};

}  // namespace shardwise
