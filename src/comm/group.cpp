#include "shardwise/comm/group.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// A group of at most this many ranks past 4 x its size keeps a dense table of member indices.
constexpr std::int64_t kDenseSlack = 64;

}  // namespace

Group::Group() : members_(std::make_shared<const Members>()) {}

Group::Group(std::vector<Rank> ranks, std::string axes) : axes_(std::move(axes)) {
  Members members;
  members.ranks = std::move(ranks);
  for (Rank r : members.ranks) {
    if (r < 0) {
      throw InvalidArgument("group along '" + axes_ + "' names rank " + std::to_string(r) +
                            "; ranks are 0 or more");
    }
    members.max_rank = std::max(members.max_rank, r);
  }
  const auto size = static_cast<std::int64_t>(members.ranks.size());
  const auto named_twice = [&](Rank r) {
    return InvalidArgument("group along '" + axes_ + "' names rank " + std::to_string(r) +
                           " twice");
  };
  if (members.max_rank < 4 * size + kDenseSlack) {
    members.index_by_rank.assign(static_cast<std::size_t>(members.max_rank + 1), -1);
    for (std::size_t i = 0; i < members.ranks.size(); ++i) {
      int& slot = members.index_by_rank[static_cast<std::size_t>(members.ranks[i])];
      if (slot >= 0) throw named_twice(members.ranks[i]);
      slot = static_cast<int>(i);
    }
  } else {
    members.sorted.reserve(members.ranks.size());
    for (std::size_t i = 0; i < members.ranks.size(); ++i) {
      members.sorted.emplace_back(members.ranks[i], static_cast<int>(i));
    }
    std::sort(members.sorted.begin(), members.sorted.end());
    for (std::size_t i = 1; i < members.sorted.size(); ++i) {
      if (members.sorted[i].first == members.sorted[i - 1].first) {
        throw named_twice(members.sorted[i].first);
      }
    }
  }
  members_ = std::make_shared<const Members>(std::move(members));
}

int Group::index_of(Rank rank) const {
  const Members& m = *members_;
  if (rank < 0 || rank > m.max_rank) return -1;
  if (!m.index_by_rank.empty()) return m.index_by_rank[static_cast<std::size_t>(rank)];
  auto it = std::lower_bound(m.sorted.begin(), m.sorted.end(), std::pair<Rank, int>{rank, -1});
  return it != m.sorted.end() && it->first == rank ? it->second : -1;
}

Group Group::relabeled(std::string axes) const {
  Group copy = *this;
  copy.axes_ = std::move(axes);
  return copy;
}

std::string Group::to_string() const {
  const std::vector<Rank>& r = ranks();
  // A message names at most the first 8 and the last rank.
  constexpr std::size_t kShown = 8;
  std::string text = "[";
  for (std::size_t i = 0; i < r.size() && i < kShown; ++i) {
    text += (i ? ", " : "") + std::to_string(r[i]);
  }
  if (r.size() > kShown + 1) text += ", ...";
  if (r.size() > kShown) text += ", " + std::to_string(r.back());
  text += "]";
  if (r.size() > kShown + 1) text += " (" + std::to_string(r.size()) + " ranks)";
  return text + " along '" + axes_ + "'";
}

bool operator==(const Group& a, const Group& b) {
  return a.axes_ == b.axes_ && a.same_ranks(b);
}

Group world_group(int size) {
  std::vector<Rank> ranks(static_cast<std::size_t>(std::max(size, 0)));
  for (Rank r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  return Group(std::move(ranks));
}

Group group_along(const Mesh& mesh, const std::vector<std::string>& axes, Rank rank) {
  // The label names the axes in mesh order, so that the same traffic is always counted under
  // one key ("data+model", never "model+data").
  std::vector<std::string> ordered = axes;
  std::sort(ordered.begin(), ordered.end(), [&](const std::string& a, const std::string& b) {
    return mesh.has_axis(a) && mesh.has_axis(b) && mesh.axis_index(a) < mesh.axis_index(b);
  });
  std::string label;
  for (const std::string& axis : ordered) label += (label.empty() ? "" : "+") + axis;
  if (!mesh.contains_device(rank)) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is not a device of " +
                          mesh.to_string());
  }
  std::vector<Rank> members;
  for (DeviceId device : mesh.group_of(axes, rank)) members.push_back(static_cast<Rank>(device));
  return Group(std::move(members), label.empty() ? "self" : label);
}

}  // namespace shardwise
