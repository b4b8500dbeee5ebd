#pragma once
// ParallelismConfig: a mesh shape with axis names, and the ShardingConfig it serves.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/strategy/sharding_config.hpp"

namespace shardwise {

// The mesh axis names shardwise gives each parallelism degree.
inline constexpr std::string_view kDataAxis = "data";
inline constexpr std::string_view kFsdpAxis = "fsdp";
inline constexpr std::string_view kModelAxis = "model";
inline constexpr std::string_view kPipelineAxis = "pipeline";
inline constexpr std::string_view kExpertAxis = "expert";

struct ParallelismConfig {
  std::vector<std::int64_t> mesh_shape;
  std::vector<std::string> mesh_axis_names;
  ShardingConfig sharding_config;

  // True when validate() would not throw.
  [[nodiscard]] bool is_valid() const;
  // Throws InvalidArgument naming the field: shape and names of equal length, names unique,
  // sizes >= 1, the product equal to the config's device count, and every degree > 1 matched
  // by its axis ('data', 'fsdp', 'expert', 'model', 'pipeline') of that size.
  void validate() const;

  // One axis per degree > 1, outermost first: pipeline, data, fsdp, expert, model (the
  // tensor-parallel axis innermost, where neighbouring devices have the fastest links, the
  // experts' all-to-all next to it). All degrees 1 gives
  // the shape (1,) named 'data'.
  static ParallelismConfig from_sharding_config(const ShardingConfig& config);

  // The config a mesh with axes named 'data', 'fsdp', 'expert', 'model' and 'pipeline' (any subset,
  // any order) stands for; FSDP is enabled by an 'fsdp' axis, or over 'data' when fsdp_on_data.
  // Throws InvalidArgument naming an axis of size > 1 with another name.
  static ParallelismConfig from_mesh(const Mesh& mesh, bool fsdp_on_data = false);

  // The validated mesh, with the given device ids (default 0..n-1).
  [[nodiscard]] Mesh to_mesh(std::optional<std::vector<DeviceId>> device_ids = std::nullopt) const;

  // {"mesh_shape": [...], "mesh_axis_names": [...], "sharding_config": {...}}; unknown keys are
  // errors; the result is validated.
  static ParallelismConfig from_json(std::string_view text);
  [[nodiscard]] std::string to_json() const;

  friend bool operator==(const ParallelismConfig&, const ParallelismConfig&) = default;
};

}  // namespace shardwise
