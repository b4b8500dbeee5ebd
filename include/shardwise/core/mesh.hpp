#pragma once
// A device mesh: ordered, named axes with sizes, and the id of the device at every mesh
// position. Positions are row-major: the last axis varies fastest, as in jax.sharding.Mesh.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardwise {

using DeviceId = std::int64_t;

class Mesh {
 public:
  // Bounds on a mesh: the largest clusters hold about 10^5 devices, so a mesh of more than
  // 2^20 is a typo (data=999999999), refused before gigabytes are allocated for it.
  static constexpr std::int64_t kMaxDevices = std::int64_t{1} << 20;
  static constexpr std::size_t kMaxAxes = 64;

  // Device ids default to 0..n-1 in mesh order. Throws InvalidArgument when there are no
  // axes or more than kMaxAxes, a name is empty, not an identifier or repeated, a size is < 1,
  // the product passes kMaxDevices, or the ids are of the wrong count, negative or repeated.
  Mesh(std::vector<std::string> axis_names, std::vector<std::int64_t> axis_sizes,
       std::optional<std::vector<DeviceId>> device_ids = std::nullopt);

  // Parses "data=2,model=4" or the printed form "Mesh('data': 2, 'model': 4)", which may end
  // with ", devices=[...]" giving the device ids in mesh order.
  static Mesh parse(std::string_view text);

  [[nodiscard]] const std::vector<std::string>& axis_names() const { return axis_names_; }
  [[nodiscard]] const std::vector<std::int64_t>& axis_sizes() const { return axis_sizes_; }
  [[nodiscard]] const std::vector<DeviceId>& device_ids() const { return device_ids_; }
  [[nodiscard]] std::size_t num_axes() const { return axis_names_.size(); }
  // Number of devices (the product of the axis sizes).
  [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(device_ids_.size()); }
  [[nodiscard]] bool has_default_device_ids() const;

  [[nodiscard]] bool has_axis(std::string_view name) const;
  // Index of the axis in mesh order; throws InvalidArgument for an unknown name.
  [[nodiscard]] std::size_t axis_index(std::string_view name) const;
  [[nodiscard]] std::int64_t axis_size(std::string_view name) const;

  // Row-major position of a mesh coordinate, and back.
  [[nodiscard]] std::int64_t position_of(const std::vector<std::int64_t>& coords) const;
  [[nodiscard]] std::vector<std::int64_t> coords_at(std::int64_t position) const;
  // Throws InvalidArgument for an id that is not in the mesh.
  [[nodiscard]] std::int64_t position_of_device(DeviceId device) const;
  [[nodiscard]] bool contains_device(DeviceId device) const;

  [[nodiscard]] DeviceId device_at(const std::vector<std::int64_t>& coords) const;
  [[nodiscard]] std::vector<std::int64_t> coords_of(DeviceId device) const;

  // For every setting of the axes not in `axes` (row-major over them), the devices that differ
  // only along `axes`, in mesh order. groups({}) puts every device alone; groups(all axes) is
  // one group of every device. Throws for an unknown or repeated axis.
  [[nodiscard]] std::vector<std::vector<DeviceId>> groups(
      const std::vector<std::string>& axes) const;
  // The one of groups(axes) that holds `device`, in time linear in its size. Throws
  // InvalidArgument for an unknown or repeated axis or a device not in the mesh.
  [[nodiscard]] std::vector<DeviceId> group_of(const std::vector<std::string>& axes,
                                               DeviceId device) const;

  // "Mesh('data': 2, 'model': 4)", with ", devices=[...]" when the ids are not 0..n-1.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const Mesh&, const Mesh&) = default;

 private:
  [[nodiscard]] std::optional<std::int64_t> find_position(DeviceId device) const;
  // Which axes `axes` names; throws for an unknown or repeated one.
  [[nodiscard]] std::vector<bool> axes_mask(const std::vector<std::string>& axes) const;

  std::vector<std::string> axis_names_;
  std::vector<std::int64_t> axis_sizes_;
  std::vector<DeviceId> device_ids_;
  // (device id, mesh position), sorted by id: ids may be sparse and large.
  std::vector<std::pair<DeviceId, std::int64_t>> position_by_device_;
};

inline std::ostream& operator<<(std::ostream& out, const Mesh& value) {
  return out << value.to_string();
}

}  // namespace shardwise

template <>
struct std::hash<shardwise::Mesh> {
  std::size_t operator()(const shardwise::Mesh& mesh) const noexcept;
};
