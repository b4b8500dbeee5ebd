#include "shardwise/core/placement.hpp"

#include <algorithm>
#include <map>

#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"

namespace shardwise {
namespace {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// Resolves Shard(-k) against `rank` and checks the dimension is in range.
int normalized_dim(const Mesh& mesh, std::size_t axis, int dim, std::optional<std::size_t> rank) {
  const std::string where = "placement of mesh axis '" + mesh.axis_names()[axis] + "'";
  if (dim < 0) {
    if (!rank) {
      throw ShardingError(where + " is Shard(dim=" + std::to_string(dim) +
                          "); a negative dimension needs the array's rank");
    }
    dim += static_cast<int>(*rank);
  }
  if (dim < 0 || (rank && static_cast<std::size_t>(dim) >= *rank) ||
      static_cast<std::size_t>(dim) >= kMaxRank) {
    throw ShardingError(where + " shards dimension " + std::to_string(dim) +
                        ", outside an array of rank " + std::to_string(rank.value_or(0)));
  }
  return dim;
}

// The axes that split one dimension, in the order their Shard positions give.
std::vector<std::string> order_axes(const Mesh& mesh, int dim,
                                    const std::vector<std::pair<int, std::size_t>>& members) {
  const bool explicit_order = members.front().first >= 0;
  std::vector<std::string> axes(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto [position, axis] = members[i];
    if ((position >= 0) != explicit_order) {
      throw ShardingError("dimension " + std::to_string(dim) +
                          " mixes Shard placements with and without a position");
    }
    const std::size_t slot = explicit_order ? static_cast<std::size_t>(position) : i;
    if (slot >= axes.size() || !axes[slot].empty()) {
      throw ShardingError("dimension " + std::to_string(dim) + " is split by " +
                          std::to_string(members.size()) + " axes but axis '" +
                          mesh.axis_names()[axis] + "' has position " + std::to_string(position) +
                          "; expected distinct positions 0.." + std::to_string(members.size() - 1));
    }
    axes[slot] = mesh.axis_names()[axis];
  }
  return axes;
}

}  // namespace

std::string to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view text) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    if (text == to_string(op)) return op;
  }
  throw ParseError("reduce op '" + echo_input(text) + "' is not one of sum, avg, max, min");
}

std::string to_string(const Placement& placement) {
  return std::visit(Overloaded{
                        [](const Replicate&) { return std::string("Replicate()"); },
                        [](const Shard& s) {
                          std::string out = "Shard(dim=" + std::to_string(s.dim);
                          if (s.position >= 0) out += ", position=" + std::to_string(s.position);
                          return out + ")";
                        },
                        [](const Partial& p) { return "Partial(" + to_string(p.op) + ")"; },
                    },
                    placement);
}

std::string to_string(const Placements& placements) {
  std::string out = "(";
  for (std::size_t i = 0; i < placements.size(); ++i) {
    out += (i ? ", " : "") + to_string(placements[i]);
  }
  return out + ")";
}

Placements to_placements(const Mesh& mesh, const PartitionSpec& spec) {
  NamedSharding checked(mesh, spec);  // validates the axes
  Placements placements(mesh.num_axes(), Replicate{});
  for (std::size_t d = 0; d < spec.size(); ++d) {
    const auto& axes = spec.entry(d).axes();
    const bool in_mesh_order =
        std::is_sorted(axes.begin(), axes.end(), [&](const std::string& x, const std::string& y) {
          return mesh.axis_index(x) < mesh.axis_index(y);
        });
    for (std::size_t i = 0; i < axes.size(); ++i) {
      placements[mesh.axis_index(axes[i])] =
          Shard{static_cast<int>(d), in_mesh_order ? -1 : static_cast<int>(i)};
    }
  }
  return placements;
}

PartitionSpec to_partition_spec(const Mesh& mesh, const Placements& placements,
                                std::optional<std::size_t> rank) {
  if (rank && *rank > kMaxRank) {
    throw ShardingError("rank " + std::to_string(*rank) + " is past the largest, " +
                        std::to_string(kMaxRank));
  }
  if (placements.size() != mesh.num_axes()) {
    throw ShardingError("got " + std::to_string(placements.size()) + " placements for " +
                        mesh.to_string() + ", which has " + std::to_string(mesh.num_axes()) +
                        " axes; expected one per axis");
  }
  std::map<int, std::vector<std::pair<int, std::size_t>>> members;  // dim -> (position, axis)
  for (std::size_t a = 0; a < placements.size(); ++a) {
    if (const auto* partial = std::get_if<Partial>(&placements[a])) {
      throw ShardingError("placement of mesh axis '" + mesh.axis_names()[a] + "' is Partial(" +
                          to_string(partial->op) +
                          "); a PartitionSpec cannot hold a pending reduction");
    }
    if (const auto* shard = std::get_if<Shard>(&placements[a])) {
      members[normalized_dim(mesh, a, shard->dim, rank)].emplace_back(shard->position, a);
    }
  }
  std::size_t size = rank.value_or(members.empty() ? 0 : members.rbegin()->first + 1);
  std::vector<SpecEntry> entries(size);
  for (const auto& [dim, axes] : members) {
    entries[static_cast<std::size_t>(dim)] = SpecEntry(order_axes(mesh, dim, axes));
  }
  return PartitionSpec(std::move(entries));
}

}  // namespace shardwise
