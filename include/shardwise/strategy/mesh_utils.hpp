#pragma once
// Mesh utilities of the reference's companion module: meshes from shapes or configs over the
// devices at hand, balanced mesh shapes, and checks of a shape against a device count.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/strategy/parallelism_config.hpp"

namespace shardwise {

// A mesh of this shape and these names over the given devices in order (default 0..n-1). With
// more devices than the shape needs, the first ones are used; with fewer, InvalidArgument.
Mesh create_device_mesh(const std::vector<std::int64_t>& shape,
                        const std::vector<std::string>& names,
                        const std::optional<std::vector<DeviceId>>& devices = std::nullopt);

// Creates meshes over a fixed set of devices.
class DeviceMeshManager {
 public:
  // Devices 0..num_devices-1. Throws InvalidArgument for num_devices < 1.
  explicit DeviceMeshManager(std::int64_t num_devices);
  // Explicit ids (non-empty, no repeats).
  explicit DeviceMeshManager(std::vector<DeviceId> devices);

  [[nodiscard]] std::int64_t num_devices() const {
    return static_cast<std::int64_t>(devices_.size());
  }
  [[nodiscard]] const std::vector<DeviceId>& devices() const { return devices_; }

  // Throws InvalidArgument naming both counts when the shape needs more devices than there are.
  [[nodiscard]] Mesh create_mesh(const std::vector<std::int64_t>& shape,
                                 const std::vector<std::string>& names) const;
  [[nodiscard]] Mesh create_mesh_from_config(const ParallelismConfig& config) const;

 private:
  std::vector<DeviceId> devices_;
};

// The most balanced `num_dims` factors of n (smallest largest factor, then smallest spread),
// largest first; the product is exactly n. Throws InvalidArgument for n < 1 or num_dims < 1.
std::vector<std::int64_t> get_optimal_mesh_shape(std::int64_t n, std::int64_t num_dims);

// True when every size is >= 1 and the product is exactly num_devices.
bool validate_mesh_config(const std::vector<std::int64_t>& shape, std::int64_t num_devices);
// The same, throwing InvalidArgument that says what is wrong.
void check_mesh_config(const std::vector<std::int64_t>& shape, std::int64_t num_devices);

// A mesh suggested for a transformer by its size, and what the suggestion rests on.
struct TransformerMeshSuggestion {
  ParallelismConfig config;
  std::string note;
};

// The reference's optimize_for_transformer(n, "7B", seq_len): a heuristic on the parameter
// count alone. Below 1B data parallel (n <= 8) or data 8 x tensor n / 8; 1B-10B data only for
// n <= 4, else tensor min(4, n / 2); from 10B tensor min(8, n / 2); data takes the rest. Where
// the reference's tensor degree does not divide n (it then leaves devices idle), the largest
// divisor below it is used, so the product is always n. model_size is "<number>B" or
// "<number>M" (e.g. "7B", "350M", "1.5b"); sequence_length must be >= 1 and, as in the
// reference, does not change the answer. The note says it is a heuristic: the planner
// answers the question from memory and time. Throws InvalidArgument for n < 1, a model size
// that is not a positive finite number of B or M, or a sequence length < 1.
TransformerMeshSuggestion optimize_for_transformer(std::int64_t num_devices,
                                                   const std::string& model_size,
                                                   std::int64_t sequence_length);

}  // namespace shardwise
