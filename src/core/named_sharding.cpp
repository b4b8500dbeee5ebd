#include "shardwise/core/named_sharding.hpp"

#include "shardwise/core/checked_math.hpp"

#include <algorithm>
#include <map>

#include "detail/check.hpp"
#include "detail/hash_combine.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// "('data', 'model') of sizes 2 x 4" for error messages.
std::string describe_axes(const Mesh& mesh, const SpecEntry& entry) {
  std::string names = "(";
  std::string sizes;
  for (std::size_t i = 0; i < entry.axes().size(); ++i) {
    names += (i ? ", '" : "'") + entry.axes()[i] + "'";
    sizes += (i ? " x " : "") + std::to_string(mesh.axis_size(entry.axes()[i]));
  }
  return names + ") of size" + (entry.axes().size() > 1 ? "s " : " ") + sizes;
}

void validate_spec_axes(const Mesh& mesh, const PartitionSpec& spec) {
  std::vector<int> used_by(mesh.num_axes(), -1);
  for (std::size_t d = 0; d < spec.size(); ++d) {
    for (const std::string& axis : spec.entry(d).axes()) {
      if (!mesh.has_axis(axis)) {
        throw ShardingError("partition spec " + spec.to_string() + " names axis '" + axis +
                            "' in dimension " + std::to_string(d) + ", which is not in " +
                            mesh.to_string());
      }
      int& user = used_by[mesh.axis_index(axis)];
      if (user == static_cast<int>(d)) {
        throw ShardingError("axis '" + axis + "' appears twice in dimension " + std::to_string(d) +
                            " of " + spec.to_string());
      }
      if (user >= 0) {
        throw ShardingError("axis '" + axis + "' is used by dimensions " + std::to_string(user) +
                            " and " + std::to_string(d) + " of " + spec.to_string() +
                            "; a mesh axis may split at most one dimension");
      }
      user = static_cast<int>(d);
    }
  }
}

// min(limit, k * chunk) where the product may pass 64 bits (k * chunk < limit + chunk).
std::int64_t capped_product(std::int64_t k, std::int64_t chunk, std::int64_t limit) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(k, chunk, &product)) return limit;
  return std::min(limit, product);
}

}  // namespace

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec, Evenness evenness)
    : mesh_(std::move(mesh)), spec_(std::move(spec)), evenness_(evenness) {
  validate_spec_axes(mesh_, spec_);
  entry_shards_.reserve(spec_.size());
  for (const SpecEntry& entry : spec_.entries()) {
    std::int64_t shards = 1;
    for (const std::string& axis : entry.axes()) shards *= mesh_.axis_size(axis);
    entry_shards_.push_back(shards);
  }
}

void NamedSharding::validate(const Shape& global_shape) const {
  if (spec_.size() > global_shape.size()) {
    throw ShardingError("partition spec " + spec_.to_string() + " has " +
                        std::to_string(spec_.size()) + " entries but the array of shape " +
                        shardwise::to_string(global_shape) + " has rank " +
                        std::to_string(global_shape.size()));
  }
  if (evenness_ == Evenness::kUneven) return;
  for (std::size_t d = 0; d < spec_.size(); ++d) {
    if (global_shape[d] % entry_shards_[d] != 0) {
      throw ShardingError(
          "dimension " + std::to_string(d) + " has size " + std::to_string(global_shape[d]) +
          ", not divisible by " + std::to_string(entry_shards_[d]) + " shards of " +
          describe_axes(mesh_, spec_.entry(d)) + "; allow uneven sharding (--uneven) to accept it");
    }
  }
}

std::vector<std::int64_t> NamedSharding::num_shards(std::size_t rank) const {
  if (rank > kMaxRank) {
    throw ShardingError("rank " + std::to_string(rank) + " is past the largest, " +
                        std::to_string(kMaxRank));
  }
  if (spec_.size() > rank) {
    throw ShardingError("partition spec " + spec_.to_string() + " has " +
                        std::to_string(spec_.size()) + " entries but the array has rank " +
                        std::to_string(rank));
  }
  std::vector<std::int64_t> shards(rank, 1);
  std::copy(entry_shards_.begin(), entry_shards_.end(), shards.begin());
  return shards;
}

std::int64_t NamedSharding::num_replicas() const {
  std::int64_t used = 1;
  for (std::int64_t shards : entry_shards_) used *= shards;
  return mesh_.size() / used;
}

bool NamedSharding::is_fully_replicated() const { return num_replicas() == mesh_.size(); }

std::int64_t NamedSharding::shard_coord(std::int64_t position, std::size_t d) const {
  std::int64_t coord = 0;
  std::vector<std::int64_t> coords = mesh_.coords_at(position);
  for (const std::string& axis : spec_.entry(d).axes()) {
    std::size_t a = mesh_.axis_index(axis);
    coord = coord * mesh_.axis_sizes()[a] + coords[a];
  }
  return coord;
}

ShardIndex NamedSharding::index_at(const Shape& global_shape, std::int64_t position) const {
  ShardIndex index(global_shape.size());
  for (std::size_t d = 0; d < global_shape.size(); ++d) {
    const std::int64_t size = global_shape[d];
    if (d >= spec_.size() || entry_shards_[d] == 1) {
      index[d] = {0, size};
      continue;
    }
    const std::int64_t chunk = ceil_divide(size, entry_shards_[d]);
    const std::int64_t coord = shard_coord(position, d);
    index[d] = {capped_product(coord, chunk, size), capped_product(coord + 1, chunk, size)};
  }
  return index;
}

Shape NamedSharding::shard_shape(const Shape& global_shape) const {
  validate(global_shape);
  Shape shape = global_shape;
  for (std::size_t d = 0; d < spec_.size(); ++d) {
    shape[d] = ceil_divide(global_shape[d], entry_shards_[d]);
  }
  return shape;
}

ShardIndex NamedSharding::device_index(const Shape& global_shape, DeviceId device) const {
  validate(global_shape);
  return index_at(global_shape, mesh_.position_of_device(device));
}

std::int64_t NamedSharding::replica_id(const Shape& global_shape, DeviceId device) const {
  for (const DeviceShard& shard : devices_indices_map(global_shape)) {
    if (shard.device == device) return shard.replica_id;
  }
  throw InvalidArgument("device " + std::to_string(device) + " is not in " + mesh_.to_string());
}

std::vector<DeviceShard> NamedSharding::devices_indices_map(const Shape& global_shape) const {
  validate(global_shape);
  std::vector<DeviceShard> shards;
  shards.reserve(static_cast<std::size_t>(mesh_.size()));
  // JAX's rule: a replica id counts the earlier devices, in mesh order, with an equal index.
  std::map<std::vector<std::int64_t>, std::int64_t> holders;
  for (std::int64_t p = 0; p < mesh_.size(); ++p) {
    ShardIndex index = index_at(global_shape, p);
    std::vector<std::int64_t> key;
    key.reserve(2 * index.size());
    for (const IndexRange& range : index) key.insert(key.end(), {range.start, range.stop});
    shards.push_back(
        {mesh_.device_ids()[static_cast<std::size_t>(p)], std::move(index), holders[key]++});
  }
  return shards;
}

bool NamedSharding::is_equivalent_to(const NamedSharding& other, std::size_t rank) const {
  if (num_shards(rank) != other.num_shards(rank)) return false;
  if (mesh_.size() != other.mesh_.size()) return false;
  for (std::int64_t p = 0; p < mesh_.size(); ++p) {
    const DeviceId device = mesh_.device_ids()[static_cast<std::size_t>(p)];
    if (!other.mesh_.contains_device(device)) return false;
    const std::int64_t q = other.mesh_.position_of_device(device);
    for (std::size_t d = 0; d < rank; ++d) {
      const std::int64_t mine = d < spec_.size() ? shard_coord(p, d) : 0;
      const std::int64_t theirs = d < other.spec_.size() ? other.shard_coord(q, d) : 0;
      if (mine != theirs) return false;
    }
  }
  return true;
}

std::string NamedSharding::to_string() const {
  std::string out = "NamedSharding(mesh=" + mesh_.to_string() + ", spec=" + spec_.to_string();
  if (evenness_ == Evenness::kUneven) out += ", uneven";
  return out + ")";
}

}  // namespace shardwise

std::size_t std::hash<shardwise::NamedSharding>::operator()(
    const shardwise::NamedSharding& sharding) const noexcept {
  std::size_t seed = std::hash<shardwise::Mesh>{}(sharding.mesh());
  shardwise::detail::hash_combine(seed, sharding.spec());
  shardwise::detail::hash_combine(seed, static_cast<int>(sharding.evenness()));
  return seed;
}
