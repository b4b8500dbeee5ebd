#include "shardwise/array/transfer_plan.hpp"

#include <algorithm>
#include <map>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::vector<Transfer> plan_transfers(const NamedSharding& source, const NamedSharding& target,
                                     const Shape& global_shape, std::optional<Rank> only_to) {
  std::vector<DeviceId> source_devices = source.mesh().device_ids();
  std::vector<DeviceId> target_devices = target.mesh().device_ids();
  std::sort(source_devices.begin(), source_devices.end());
  std::sort(target_devices.begin(), target_devices.end());
  if (source_devices != target_devices) {
    throw ShardingError("cannot move an array from " + source.mesh().to_string() + " to " +
                        target.mesh().to_string() + ": the meshes have different devices");
  }
  // The distinct non-empty source blocks, each with its holders in mesh order.
  std::vector<std::pair<ShardIndex, std::vector<Rank>>> blocks;
  std::map<std::string, std::size_t> block_of;
  for (const DeviceShard& shard : source.devices_indices_map(global_shape)) {
    if (is_empty(shard.index)) continue;
    const std::string key = to_string(shard.index);
    auto [it, inserted] = block_of.emplace(key, blocks.size());
    if (inserted) blocks.push_back({shard.index, {}});
    blocks[it->second].second.push_back(static_cast<Rank>(shard.device));
  }
  std::vector<std::size_t> turn(blocks.size(), 0);
  std::vector<Transfer> plan;
  for (const DeviceShard& wanted : target.devices_indices_map(global_shape)) {
    const auto receiver = static_cast<Rank>(wanted.device);
    if (only_to && *only_to != receiver) continue;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto& [index, holders] = blocks[b];
      ShardIndex box = intersect(index, wanted.index);
      if (is_empty(box)) continue;
      const bool holds = std::find(holders.begin(), holders.end(), receiver) != holders.end();
      const Rank sender = holds ? receiver : holders[turn[b]++ % holders.size()];
      plan.push_back({sender, receiver, std::move(box)});
    }
  }
  return plan;
}

std::int64_t bytes_moved(const std::vector<Transfer>& plan, std::size_t element_bytes) {
  std::int64_t bytes = 0;
  for (const Transfer& t : plan) {
    if (t.from != t.to) {
      bytes += num_elements(shape_of(t.box)) * static_cast<std::int64_t>(element_bytes);
    }
  }
  return bytes;
}

}  // namespace shardwise
