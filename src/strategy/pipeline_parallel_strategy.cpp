#include "shardwise/strategy/pipeline_parallel_strategy.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"

namespace shardwise {

PipelineParallelStrategy::PipelineParallelStrategy(std::int64_t num_stages, std::string axis_name,
                                                   std::optional<int> mesh_axis)
    : ShardingStrategy(std::move(axis_name), mesh_axis), num_stages_(num_stages) {
  if (num_stages_ < 1 || num_stages_ > Mesh::kMaxDevices) {
    throw InvalidArgument("PipelineParallelStrategy num_stages is " + std::to_string(num_stages_) +
                          "; expected 1 to " + std::to_string(Mesh::kMaxDevices));
  }
}

std::vector<std::int64_t> PipelineParallelStrategy::assign_layers_to_stages(
    std::int64_t num_layers, bool allow_empty_stages) const {
  if (num_layers < 0) {
    throw InvalidArgument("num_layers is " + std::to_string(num_layers) + "; expected >= 0");
  }
  if (num_layers < num_stages_ && !allow_empty_stages) {
    throw InvalidArgument(std::to_string(num_layers) + " layers cannot fill " +
                          std::to_string(num_stages_) +
                          " pipeline stages; use fewer stages or allow empty stages");
  }
  std::vector<std::int64_t> counts(static_cast<std::size_t>(num_stages_), num_layers / num_stages_);
  for (std::int64_t s = 0; s < num_layers % num_stages_; ++s) ++counts[static_cast<std::size_t>(s)];
  return counts;
}

std::vector<AxisClaim> PipelineParallelStrategy::axis_claims() const { return {}; }

NamedSharding PipelineParallelStrategy::apply_sharding(const Shape& shape, const Mesh& mesh) const {
  (void)axis_size_in(mesh);
  return sharding_for(mesh, P(), shape);
}

std::vector<std::pair<std::int64_t, std::int64_t>>
PipelineParallelStrategy::get_forward_communication_pattern() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  for (std::int64_t s = 0; s + 1 < num_stages_; ++s) pairs.emplace_back(s, s + 1);
  return pairs;
}

std::vector<std::pair<std::int64_t, std::int64_t>>
PipelineParallelStrategy::get_backward_communication_pattern() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  for (std::int64_t s = 0; s + 1 < num_stages_; ++s) pairs.emplace_back(s + 1, s);
  return pairs;
}

}  // namespace shardwise
