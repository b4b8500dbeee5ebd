#include "shardwise/core/mesh.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "detail/hash_combine.hpp"
#include "detail/text_scanner.hpp"
#include "detail/check.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::int64_t checked_product(const std::vector<std::string>& names,
                             const std::vector<std::int64_t>& sizes) {
  std::int64_t product = 1;
  for (std::int64_t size : sizes) {
    if (product > Mesh::kMaxDevices / size) {
      std::string text;
      for (std::size_t a = 0; a < names.size(); ++a) {
        text += (a ? ", " : "") + names[a] + "=" + std::to_string(sizes[a]);
      }
      throw InvalidArgument("mesh " + echo_input(text) + " has more than " +
                            std::to_string(Mesh::kMaxDevices) + " devices, the most a mesh may have");
    }
    product *= size;
  }
  return product;
}

void validate_axes(const std::vector<std::string>& names, const std::vector<std::int64_t>& sizes) {
  if (names.size() != sizes.size()) {
    throw InvalidArgument("mesh has " + std::to_string(names.size()) + " axis names but " +
                          std::to_string(sizes.size()) + " axis sizes");
  }
  if (names.empty()) throw InvalidArgument("mesh has no axes; expected at least one");
  if (names.size() > Mesh::kMaxAxes) {
    throw InvalidArgument("mesh has " + std::to_string(names.size()) + " axes; at most " +
                          std::to_string(Mesh::kMaxAxes) + " are allowed");
  }
  for (std::size_t a = 0; a < names.size(); ++a) {
    if (!detail::is_identifier(names[a])) {
      throw InvalidArgument("mesh axis " + std::to_string(a) + " has name '" + echo_input(names[a]) +
                            "'; expected an identifier ([A-Za-z_][A-Za-z0-9_]*)");
    }
    for (std::size_t b = 0; b < a; ++b) {
      if (names[a] == names[b]) {
        throw InvalidArgument("mesh axis name '" + names[a] + "' is used by axes " +
                              std::to_string(b) + " and " + std::to_string(a));
      }
    }
    if (sizes[a] < 1) {
      throw InvalidArgument("mesh axis '" + names[a] + "' has size " + std::to_string(sizes[a]) +
                            "; expected a size >= 1");
    }
  }
}

}  // namespace

Mesh::Mesh(std::vector<std::string> axis_names, std::vector<std::int64_t> axis_sizes,
           std::optional<std::vector<DeviceId>> device_ids)
    : axis_names_(std::move(axis_names)), axis_sizes_(std::move(axis_sizes)) {
  validate_axes(axis_names_, axis_sizes_);
  const std::int64_t count = checked_product(axis_names_, axis_sizes_);
  if (device_ids) {
    if (static_cast<std::int64_t>(device_ids->size()) != count) {
      throw InvalidArgument("mesh " + to_string() + " has " + std::to_string(count) +
                            " positions but " + std::to_string(device_ids->size()) +
                            " device ids were given");
    }
    device_ids_ = std::move(*device_ids);
  } else {
    device_ids_.resize(static_cast<std::size_t>(count));
    std::iota(device_ids_.begin(), device_ids_.end(), DeviceId{0});
  }
  position_by_device_.reserve(device_ids_.size());
  for (std::size_t p = 0; p < device_ids_.size(); ++p) {
    if (device_ids_[p] < 0) {
      throw InvalidArgument("mesh device id " + std::to_string(device_ids_[p]) + " at position " +
                            std::to_string(p) + " is negative; expected ids >= 0");
    }
    position_by_device_.emplace_back(device_ids_[p], static_cast<std::int64_t>(p));
  }
  std::sort(position_by_device_.begin(), position_by_device_.end());
  for (std::size_t i = 1; i < position_by_device_.size(); ++i) {
    if (position_by_device_[i].first == position_by_device_[i - 1].first) {
      throw InvalidArgument("mesh device id " + std::to_string(position_by_device_[i].first) +
                            " appears at positions " +
                            std::to_string(position_by_device_[i - 1].second) + " and " +
                            std::to_string(position_by_device_[i].second));
    }
  }
}

Mesh Mesh::parse(std::string_view text) {
  detail::TextScanner scan(text, "mesh");
  std::vector<std::string> names;
  std::vector<std::int64_t> sizes;
  std::optional<std::vector<DeviceId>> ids;
  scan.skip_space();
  if (scan.consume_word("Mesh")) {
    scan.skip_space();
    scan.expect('(');
    while (true) {
      scan.skip_space();
      if (scan.consume_word("devices")) {
        scan.skip_space();
        scan.expect('=');
        scan.skip_space();
        scan.expect('[');
        ids.emplace();
        scan.skip_space();
        while (!scan.consume(']')) {
          ids->push_back(scan.integer("a device id"));
          scan.skip_space();
          if (!scan.consume(',')) {
            scan.skip_space();
            scan.expect(']');
            break;
          }
          scan.skip_space();
        }
        scan.skip_space();
        break;
      }
      names.push_back(scan.quoted("a quoted axis name"));
      scan.skip_space();
      scan.expect(':');
      scan.skip_space();
      sizes.push_back(scan.integer("an axis size"));
      scan.skip_space();
      if (!scan.consume(',')) break;
    }
    scan.expect(')');
  } else {
    do {
      scan.skip_space();
      names.push_back(scan.identifier("an axis name"));
      scan.skip_space();
      scan.expect('=');
      scan.skip_space();
      sizes.push_back(scan.integer("an axis size"));
      scan.skip_space();
    } while (scan.consume(','));
  }
  scan.expect_end();
  try {
    return Mesh(std::move(names), std::move(sizes), std::move(ids));
  } catch (const InvalidArgument& e) {
    throw ParseError("mesh '" + echo_input(text) + "': " + e.what());
  }
}

bool Mesh::has_default_device_ids() const {
  for (std::size_t p = 0; p < device_ids_.size(); ++p) {
    if (device_ids_[p] != static_cast<DeviceId>(p)) return false;
  }
  return true;
}

bool Mesh::has_axis(std::string_view name) const {
  return std::find(axis_names_.begin(), axis_names_.end(), name) != axis_names_.end();
}

std::size_t Mesh::axis_index(std::string_view name) const {
  auto it = std::find(axis_names_.begin(), axis_names_.end(), name);
  if (it == axis_names_.end()) {
    throw InvalidArgument("axis '" + std::string(name) + "' is not in " + to_string());
  }
  return static_cast<std::size_t>(it - axis_names_.begin());
}

std::int64_t Mesh::axis_size(std::string_view name) const { return axis_sizes_[axis_index(name)]; }

std::int64_t Mesh::position_of(const std::vector<std::int64_t>& coords) const {
  if (coords.size() != num_axes()) {
    throw InvalidArgument("coordinate has " + std::to_string(coords.size()) + " entries; " +
                          to_string() + " has " + std::to_string(num_axes()) + " axes");
  }
  std::int64_t position = 0;
  for (std::size_t a = 0; a < num_axes(); ++a) {
    if (coords[a] < 0 || coords[a] >= axis_sizes_[a]) {
      throw InvalidArgument("coordinate " + std::to_string(coords[a]) + " on axis '" +
                            axis_names_[a] + "' is outside [0, " + std::to_string(axis_sizes_[a]) +
                            ")");
    }
    position = position * axis_sizes_[a] + coords[a];
  }
  return position;
}

std::vector<std::int64_t> Mesh::coords_at(std::int64_t position) const {
  if (position < 0 || position >= size()) {
    throw InvalidArgument("mesh position " + std::to_string(position) + " is outside [0, " +
                          std::to_string(size()) + ")");
  }
  std::vector<std::int64_t> coords(num_axes());
  for (std::size_t a = num_axes(); a-- > 0;) {
    coords[a] = position % axis_sizes_[a];
    position /= axis_sizes_[a];
  }
  return coords;
}

std::optional<std::int64_t> Mesh::find_position(DeviceId device) const {
  auto it = std::lower_bound(position_by_device_.begin(), position_by_device_.end(), device,
                             [](const auto& entry, DeviceId id) { return entry.first < id; });
  if (it == position_by_device_.end() || it->first != device) return std::nullopt;
  return it->second;
}

bool Mesh::contains_device(DeviceId device) const { return find_position(device).has_value(); }

std::int64_t Mesh::position_of_device(DeviceId device) const {
  const std::optional<std::int64_t> position = find_position(device);
  if (!position) {
    throw InvalidArgument("device " + std::to_string(device) + " is not in " + to_string());
  }
  return *position;
}

DeviceId Mesh::device_at(const std::vector<std::int64_t>& coords) const {
  return device_ids_[static_cast<std::size_t>(position_of(coords))];
}

std::vector<std::int64_t> Mesh::coords_of(DeviceId device) const {
  return coords_at(position_of_device(device));
}

std::vector<bool> Mesh::axes_mask(const std::vector<std::string>& axes) const {
  std::vector<bool> in_group(num_axes(), false);
  for (const std::string& name : axes) {
    std::size_t a = axis_index(name);
    if (in_group[a]) {
      throw InvalidArgument("axis '" + name + "' appears twice in the group axes");
    }
    in_group[a] = true;
  }
  return in_group;
}

std::vector<DeviceId> Mesh::group_of(const std::vector<std::string>& axes,
                                     DeviceId device) const {
  const std::vector<bool> in_group = axes_mask(axes);
  std::vector<std::int64_t> coords = coords_of(device);
  std::vector<std::size_t> along;  // the group's axes, in mesh order
  for (std::size_t a = 0; a < num_axes(); ++a) {
    if (!in_group[a]) continue;
    along.push_back(a);
    coords[a] = 0;
  }
  // Row-major over the group's axes, the others fixed at the device's coordinates: mesh order.
  std::vector<DeviceId> members;
  while (true) {
    members.push_back(device_ids_[static_cast<std::size_t>(position_of(coords))]);
    std::size_t k = along.size();
    for (; k > 0; --k) {
      const std::size_t a = along[k - 1];
      if (++coords[a] < axis_sizes_[a]) break;
      coords[a] = 0;
    }
    if (k == 0) return members;
  }
}

std::vector<std::vector<DeviceId>> Mesh::groups(const std::vector<std::string>& axes) const {
  const std::vector<bool> in_group = axes_mask(axes);
  std::int64_t group_size = 1;
  for (std::size_t a = 0; a < num_axes(); ++a) {
    if (in_group[a]) group_size *= axis_sizes_[a];
  }
  // Mesh order visits the devices of every group in mesh order; the group a device joins is
  // numbered row-major by its coordinates on the other axes.
  std::vector<std::vector<DeviceId>> out(static_cast<std::size_t>(size() / group_size));
  for (std::int64_t p = 0; p < size(); ++p) {
    std::vector<std::int64_t> coords = coords_at(p);
    std::int64_t group = 0;
    for (std::size_t a = 0; a < num_axes(); ++a) {
      if (!in_group[a]) group = group * axis_sizes_[a] + coords[a];
    }
    out[static_cast<std::size_t>(group)].push_back(device_ids_[static_cast<std::size_t>(p)]);
  }
  return out;
}

std::string Mesh::to_string() const {
  std::ostringstream out;
  out << "Mesh(";
  for (std::size_t a = 0; a < axis_names_.size(); ++a) {
    out << (a ? ", " : "") << '\'' << axis_names_[a] << "': " << axis_sizes_[a];
  }
  if (!device_ids_.empty() && !has_default_device_ids()) {
    out << ", devices=[";
    for (std::size_t p = 0; p < device_ids_.size(); ++p) out << (p ? ", " : "") << device_ids_[p];
    out << ']';
  }
  out << ')';
  return out.str();
}

}  // namespace shardwise

std::size_t std::hash<shardwise::Mesh>::operator()(const shardwise::Mesh& mesh) const noexcept {
  std::size_t seed = 0;
  for (const std::string& name : mesh.axis_names()) shardwise::detail::hash_combine(seed, name);
  for (std::int64_t size : mesh.axis_sizes()) shardwise::detail::hash_combine(seed, size);
  for (shardwise::DeviceId id : mesh.device_ids()) shardwise::detail::hash_combine(seed, id);
  return seed;
}
