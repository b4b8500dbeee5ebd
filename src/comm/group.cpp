#include "shardwise/comm/group.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

int Group::index_of(Rank rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

std::string Group::to_string() const {
  std::string text = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "] along '" + axes + "'";
}

Group world_group(int size) {
  Group group;
  for (Rank r = 0; r < size; ++r) group.ranks.push_back(r);
  return group;
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
  for (const std::vector<DeviceId>& members : mesh.groups(axes)) {
    if (std::find(members.begin(), members.end(), rank) == members.end()) continue;
    Group group{{}, label.empty() ? "self" : label};
    for (DeviceId device : members) group.ranks.push_back(static_cast<Rank>(device));
    return group;
  }
  throw InvalidArgument("rank " + std::to_string(rank) + " is not a device of " + mesh.to_string());
}

}  // namespace shardwise
