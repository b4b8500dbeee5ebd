#pragma once
// The ranks a collective runs over. In shardwise a rank is a device: the mesh's device ids are
// the ranks of the world, and a group is one of Mesh::groups(axes).

#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"

namespace shardwise {

using Rank = int;

struct Group {
  // Members in group order: member i's data is block i of a gather, and so on.
  std::vector<Rank> ranks;
  // The mesh axes the group runs along ("model", "data+model"), for messages and accounting;
  // "world" for every rank.
  std::string axes = "world";

  [[nodiscard]] int size() const { return static_cast<int>(ranks.size()); }
  // The member index of a rank, or -1.
  [[nodiscard]] int index_of(Rank rank) const;
  // "[0, 1, 2, 3] along 'model'".
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Group&, const Group&) = default;
};

// Ranks 0..size-1.
Group world_group(int size);

// The group along `axes` that holds `rank` (one of mesh.groups(axes)). Throws InvalidArgument
// for a rank that is not a device of the mesh.
Group group_along(const Mesh& mesh, const std::vector<std::string>& axes, Rank rank);

}  // namespace shardwise
