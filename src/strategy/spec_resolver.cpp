#include "detail/spec_resolver.hpp"

#include <algorithm>
#include <optional>

#include "detail/check.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

std::string axes_text(const std::vector<std::string>& axes) {
  std::string text;
  for (const std::string& axis : axes) text += (text.empty() ? "'" : ", '") + axis + "'";
  return "(" + text + ")";
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Applies rules one at a time to one tensor, then moves or drops what did not fit.
class Resolver {
 public:
  Resolver(const std::string& tensor_name, const LogicalAxes& names, const Mesh* mesh,
           const ResolveOptions& options, bool name_dimensions)
      : tensor_(tensor_name),
        names_(names),
        mesh_(mesh),
        options_(options),
        name_dimensions_(name_dimensions),
        assigned_(names.size()),
        unit_(names.size(), 1) {
    check_names_unique();
    if (!options_.shape) return;
    SHARDWISE_CHECK(mesh_ != nullptr);
    const Shape& shape = *options_.shape;
    if (shape.size() != names_.size()) {
      throw InvalidArgument(tensor_ + ": " + std::to_string(names_.size()) +
                            " logical axes for shape " + to_string(shape));
    }
    for (std::size_t d = 0; d < names_.size(); ++d) {
      auto it = options_.units.find(names_[d]);
      if (names_[d].empty() || it == options_.units.end()) continue;
      if (it->second < 1) {
        throw InvalidArgument("the unit of logical axis '" + names_[d] + "' is " +
                              std::to_string(it->second) + "; expected at least 1 element");
      }
      if (shape[d] % it->second != 0) {
        throw InvalidArgument(tensor_ + ": " + dimension_text(d) + " has size " +
                              std::to_string(shape[d]) + ", not a whole number of its units of " +
                              std::to_string(it->second) + " elements");
      }
      unit_[d] = it->second;
    }
  }

  void apply(const LogicalAxisRule& rule) {
    const auto it = std::find(names_.begin(), names_.end(), rule.logical_name);
    if (it == names_.end()) return;
    const auto d = static_cast<std::size_t>(it - names_.begin());
    if (assigned_[d]) return;
    if (rule.mesh_axes.empty()) {
      assigned_[d] = std::vector<std::string>{};
      return;
    }
    std::vector<std::string> axes;
    for (const std::string& axis : rule.mesh_axes) {
      if (mesh_ == nullptr || mesh_->axis_size(axis) > 1) axes.push_back(axis);
    }
    if (axes.empty()) return;
    if (std::any_of(axes.begin(), axes.end(), [&](const auto& a) { return contains(used_, a); })) {
      return;
    }
    if (options_.shape && (*options_.shape)[d] < rule.min_size) return;
    const std::size_t keep = fitting_prefix(d, axes);
    if (keep < axes.size()) {
      // Axes cut off behind ones that fit lost a conflict, so they may move; a rule that fits
      // with no axis at all is skipped and its axes move only when the rule says so.
      const bool may_move = keep > 0 || rule.relocatable;
      const std::string why = not_divisible_text(d, axes);
      for (std::size_t a = keep; a < axes.size(); ++a) record_unplaced(axes[a], d, why, may_move);
      if (keep == 0) return;
      axes.resize(keep);
    }
    used_.insert(used_.end(), axes.begin(), axes.end());
    assigned_[d] = std::move(axes);
  }

  SpecResolution finish() {
    SpecResolution result;
    for (const Unplaced& u : unplaced_) {
      if (contains(used_, u.axis)) continue;
      if (u.may_move) {
        if (const auto target = free_dimension_for(u.axis, u.dim)) {
          assigned_[*target] = std::vector<std::string>{u.axis};
          used_.push_back(u.axis);
          result.notes.push_back(tensor_ + ": axis '" + u.axis + "' moved from dimension " +
                                 std::to_string(u.dim) + " to dimension " +
                                 std::to_string(*target) + ": " + u.why);
          continue;
        }
      }
      result.dropped_axes.push_back(u.axis);
      result.notes.push_back(tensor_ + ": axis '" + u.axis + "' dropped: " + u.why +
                             (u.may_move ? ", and no free dimension takes it" : ""));
    }
    if (options_.strict && !result.notes.empty()) {
      throw ShardingError(result.notes.front() + " (strict layout)");
    }
    std::vector<SpecEntry> entries;
    entries.reserve(assigned_.size());
    for (auto& slot : assigned_) entries.emplace_back(slot.value_or(std::vector<std::string>{}));
    result.spec = PartitionSpec(std::move(entries));
    return result;
  }

 private:
  struct Unplaced {
    std::string axis;
    std::size_t dim;
    std::string why;
    bool may_move;
  };

  void check_names_unique() const {
    for (std::size_t d = 0; d < names_.size(); ++d) {
      if (names_[d].empty()) continue;
      for (std::size_t e = 0; e < d; ++e) {
        if (names_[e] == names_[d]) {
          throw InvalidArgument("logical axis '" + names_[d] + "' names dimensions " +
                                std::to_string(e) + " and " + std::to_string(d) +
                                "; logical names must be unique in a tensor");
        }
      }
    }
  }

  // The latest reason is the most specific one (a single-axis rule after a combined one).
  void record_unplaced(const std::string& axis, std::size_t dim, const std::string& why,
                       bool may_move) {
    for (Unplaced& u : unplaced_) {
      if (u.axis == axis) {
        u.why = why;
        u.dim = dim;
        u.may_move = u.may_move || may_move;
        return;
      }
    }
    unplaced_.push_back({axis, dim, why, may_move});
  }

  [[nodiscard]] std::int64_t shards_of(const std::vector<std::string>& axes,
                                       std::size_t count) const {
    std::int64_t shards = 1;
    for (std::size_t a = 0; a < count; ++a) shards *= mesh_->axis_size(axes[a]);
    return shards;
  }

  [[nodiscard]] bool fits(std::size_t d, std::int64_t shards) const {
    if (!options_.shape) return true;
    if (unit_[d] == 1 && options_.evenness == Evenness::kUneven) return true;
    return ((*options_.shape)[d] / unit_[d]) % shards == 0;
  }

  [[nodiscard]] std::size_t fitting_prefix(std::size_t d,
                                           const std::vector<std::string>& axes) const {
    if (!options_.shape) return axes.size();
    for (std::size_t keep = axes.size(); keep > 0; --keep) {
      if (fits(d, shards_of(axes, keep))) return keep;
    }
    return 0;
  }

  [[nodiscard]] std::optional<std::size_t> free_dimension_for(const std::string& axis,
                                                              std::size_t origin) const {
    for (std::size_t e = 0; e < assigned_.size(); ++e) {
      if (e == origin || assigned_[e] || (*options_.shape)[e] == 0) continue;
      if (fits(e, mesh_->axis_size(axis))) return e;
    }
    return std::nullopt;
  }

  [[nodiscard]] std::string dimension_text(std::size_t d) const {
    std::string text = "dimension " + std::to_string(d);
    if (name_dimensions_ && !names_[d].empty()) text += " (" + names_[d] + ")";
    return text;
  }

  [[nodiscard]] std::string not_divisible_text(std::size_t d,
                                               const std::vector<std::string>& axes) const {
    const std::int64_t size = (*options_.shape)[d];
    const std::string has =
        unit_[d] == 1 ? "has size " + std::to_string(size)
                      : "has " + std::to_string(size / unit_[d]) + " units of " +
                            std::to_string(unit_[d]) + " elements";
    return dimension_text(d) + " " + has + ", not divisible by " +
           std::to_string(shards_of(axes, axes.size())) + " shards of " + axes_text(axes);
  }

  const std::string& tensor_;
  const LogicalAxes& names_;
  const Mesh* mesh_;
  const ResolveOptions& options_;
  bool name_dimensions_;
  std::vector<std::optional<std::vector<std::string>>> assigned_;
  std::vector<std::int64_t> unit_;
  std::vector<std::string> used_;
  std::vector<Unplaced> unplaced_;
};

}  // namespace

SpecResolution resolve_rules(const std::vector<LogicalAxisRule>& rules,
                             const std::string& tensor_name, const LogicalAxes& logical_axes,
                             const Mesh* mesh, const ResolveOptions& options,
                             bool name_dimensions) {
  if (mesh != nullptr) {
    for (const LogicalAxisRule& rule : rules) {
      for (const std::string& axis : rule.mesh_axes) {
        if (!mesh->has_axis(axis)) {
          throw InvalidArgument("logical axis rule for '" + rule.logical_name +
                                "' names mesh axis '" + axis + "', which is not in " +
                                mesh->to_string());
        }
      }
    }
  }
  Resolver resolver(tensor_name, logical_axes, mesh, options, name_dimensions);
  for (const LogicalAxisRule& rule : rules) resolver.apply(rule);
  return resolver.finish();
}

}  // namespace shardwise::detail

namespace shardwise {

PartitionSpec LogicalAxisRules::logical_to_mesh_axes(const LogicalAxes& logical_axes) const {
  return detail::resolve_rules(rules_, "", logical_axes, nullptr, {}, true).spec;
}

PartitionSpec LogicalAxisRules::logical_to_mesh_axes(const LogicalAxes& logical_axes,
                                                     const Mesh& mesh) const {
  return detail::resolve_rules(rules_, "", logical_axes, &mesh, {}, true).spec;
}

SpecResolution LogicalAxisRules::resolve(const std::string& tensor_name,
                                         const LogicalAxes& logical_axes, const Mesh& mesh,
                                         const ResolveOptions& options) const {
  return detail::resolve_rules(rules_, tensor_name, logical_axes, &mesh, options, true);
}

}  // namespace shardwise
