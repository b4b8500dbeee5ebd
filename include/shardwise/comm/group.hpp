#pragma once
// The ranks a collective runs over. In shardwise a rank is a device: the mesh's device ids are
// the ranks of the world, and a group is one of Mesh::groups(axes).

#include <memory>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"

namespace shardwise {

using Rank = int;

// A list of distinct ranks in group order (member i's data is block i of a gather, and so on),
// checked once when it is made. Copies share the members, so passing a group of thousands of
// ranks to every collective costs nothing, and a member is found in constant time.
class Group {
 public:
  // The empty group.
  Group();
  // Throws InvalidArgument, naming `axes` and the rank, for a negative rank or a rank named
  // twice. `axes` are the mesh axes the group runs along ("model", "data+model"), for
  // messages and accounting; "world" for every rank.
  Group(std::vector<Rank> ranks, std::string axes = "world");  // NOLINT: a braced list is a group

  [[nodiscard]] const std::vector<Rank>& ranks() const { return members_->ranks; }
  [[nodiscard]] const std::string& axes() const { return axes_; }
  [[nodiscard]] int size() const { return static_cast<int>(members_->ranks.size()); }
  [[nodiscard]] Rank operator[](int member) const {
    return members_->ranks[static_cast<std::size_t>(member)];
  }
  // The largest rank, or -1 for the empty group.
  [[nodiscard]] Rank max_rank() const { return members_->max_rank; }
  // The member index of a rank, or -1.
  [[nodiscard]] int index_of(Rank rank) const;
  // Whether both list the same ranks in the same order (at once where one is a copy of the
  // other).
  [[nodiscard]] bool same_ranks(const Group& other) const {
    return members_ == other.members_ || ranks() == other.ranks();
  }
  // The same members under another label.
  [[nodiscard]] Group relabeled(std::string axes) const;
  // "[0, 1, 2, 3] along 'model'" (a long group is shortened: "[0, 1, 2, ..., 4095] (4096
  // ranks)").
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Group& a, const Group& b);

 private:
  struct Members {
    std::vector<Rank> ranks;
    Rank max_rank = -1;
    // index_by_rank[r] is r's member index or -1, for groups whose ranks lie close together
    // (every rank below 4 x size + 64); sparse groups keep (rank, index) pairs sorted by rank.
    std::vector<int> index_by_rank;
    std::vector<std::pair<Rank, int>> sorted;
  };
  std::shared_ptr<const Members> members_;
  std::string axes_;
};

// Ranks 0..size-1.
Group world_group(int size);

// The group along `axes` that holds `rank` (one of mesh.groups(axes)). Throws InvalidArgument
// for a rank that is not a device of the mesh.
Group group_along(const Mesh& mesh, const std::vector<std::string>& axes, Rank rank);

}  // namespace shardwise
