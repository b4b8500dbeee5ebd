#include "shardwise/array/transfer_plan.hpp"

#include <algorithm>
#include <unordered_map>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

struct IndexHash {
  std::size_t operator()(const ShardIndex& index) const noexcept {
    std::size_t h = 0x9e3779b97f4a7c15ULL;
    for (const IndexRange& r : index) {
      h = (h ^ static_cast<std::size_t>(r.start)) * 0x100000001b3ULL;
      h = (h ^ static_cast<std::size_t>(r.stop)) * 0x100000001b3ULL;
    }
    return h;
  }
};

}  // namespace

std::vector<Transfer> plan_transfers(const std::vector<SourceBlock>& sources,
                                     const std::vector<TargetBlock>& targets) {
  // The distinct non-empty source blocks, each with its holders in the order given.
  std::vector<std::pair<ShardIndex, std::vector<Rank>>> blocks;
  std::unordered_map<ShardIndex, std::size_t, IndexHash> block_of;
  for (const SourceBlock& source : sources) {
    if (is_empty(source.box)) continue;
    auto [it, inserted] = block_of.emplace(source.box, blocks.size());
    if (inserted) blocks.push_back({source.box, {}});
    blocks[it->second].second.push_back(source.holder);
  }
  std::vector<std::size_t> turn(blocks.size(), 0);
  std::vector<Transfer> plan;
  for (const TargetBlock& wanted : targets) {
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto& [index, holders] = blocks[b];
      ShardIndex box = intersect(index, wanted.box);
      if (is_empty(box)) continue;
      const bool holds =
          std::find(holders.begin(), holders.end(), wanted.receiver) != holders.end();
      const Rank sender = holds ? wanted.receiver : holders[turn[b]++ % holders.size()];
      plan.push_back({sender, wanted.receiver, std::move(box)});
    }
  }
  return plan;
}

std::vector<Transfer> plan_transfers(const std::vector<SourceBlock>& sources,
                                     const NamedSharding& target, const Shape& global_shape,
                                     std::optional<Rank> only_to) {
  std::vector<TargetBlock> targets;
  for (const DeviceShard& wanted : target.devices_indices_map(global_shape)) {
    const auto receiver = static_cast<Rank>(wanted.device);
    if (only_to && *only_to != receiver) continue;
    targets.push_back({receiver, wanted.index});
  }
  return plan_transfers(sources, targets);
}

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
  std::vector<SourceBlock> sources;
  for (const DeviceShard& shard : source.devices_indices_map(global_shape)) {
    sources.push_back({static_cast<Rank>(shard.device), shard.index});
  }
  return plan_transfers(sources, target, global_shape, only_to);
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
