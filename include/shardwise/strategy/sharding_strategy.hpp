#pragma once
// The abstract sharding strategy of the reference module: a strategy owns one mesh axis and
// maps the logical dimension names of a tensor ("batch", "hidden", "out_features", ...) to it.

#include <optional>
#include <string>
#include <vector>

#include "shardwise/array/sharded_array.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise {

// One logical name per tensor dimension; "" leaves a dimension unnamed.
using LogicalAxes = std::vector<std::string>;

enum class StrategyKind { kDataParallel, kFsdp, kTensorParallel, kPipelineParallel };

// "data_parallel", "fsdp", "tensor_parallel", "pipeline_parallel".
std::string to_string(StrategyKind kind);

struct ShardingConstraints {
  std::string axis_name;
  // The mesh axis index the strategy was built for; nullopt: wherever axis_name is.
  std::optional<int> mesh_axis;
  friend bool operator==(const ShardingConstraints&, const ShardingConstraints&) = default;
};

class ShardingStrategy {
 public:
  // Throws InvalidArgument for an axis name that is not an identifier or a negative mesh_axis.
  ShardingStrategy(std::string axis_name, std::optional<int> mesh_axis);
  virtual ~ShardingStrategy() = default;
  ShardingStrategy(const ShardingStrategy&) = default;
  ShardingStrategy& operator=(const ShardingStrategy&) = default;
  ShardingStrategy(ShardingStrategy&&) = default;
  ShardingStrategy& operator=(ShardingStrategy&&) = default;

  [[nodiscard]] virtual StrategyKind kind() const = 0;

  // The spec this strategy gives a tensor whose dimensions carry these logical names.
  [[nodiscard]] virtual PartitionSpec get_partition_spec(const LogicalAxes& dim_names) const = 0;

  // The spec this strategy proposes for a named tensor of a known shape, when it is combined
  // with others (MultiDimensionalStrategy). The default ignores the shape.
  [[nodiscard]] virtual PartitionSpec propose(const LogicalAxes& dim_names,
                                              const Shape& shape) const;

  // The sharding an array of this shape gets on this mesh (validated against the shape). The
  // runtime places real shards with it.
  [[nodiscard]] virtual NamedSharding apply_sharding(const Shape& shape,
                                                     const Mesh& mesh) const = 0;

  // Places a host array with that sharding on the runtime (collective over `comm`): from
  // `root` by a scatter, or, without a root, from the copy every rank holds (no traffic).
  [[nodiscard]] ShardedArray apply_sharding(Communicator& comm, const void* host,
                                            const Shape& shape, DType dtype, const Mesh& mesh,
                                            std::optional<Rank> root = std::nullopt) const;

  [[nodiscard]] ShardingConstraints get_sharding_constraints() const;
  [[nodiscard]] const std::string& axis_name() const { return axis_name_; }
  [[nodiscard]] std::optional<int> mesh_axis() const { return mesh_axis_; }

 protected:
  // The size of this strategy's axis in `mesh`. Throws ShardingError when the mesh has no such
  // axis, or has it at another index than mesh_axis.
  [[nodiscard]] std::int64_t axis_size_in(const Mesh& mesh) const;
  // A validated sharding of `shape` with `spec`.
  [[nodiscard]] static NamedSharding sharding_for(const Mesh& mesh, PartitionSpec spec,
                                                  const Shape& shape);

 private:
  std::string axis_name_;
  std::optional<int> mesh_axis_;
};

}  // namespace shardwise
