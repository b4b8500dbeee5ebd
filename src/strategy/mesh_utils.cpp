#include "shardwise/strategy/mesh_utils.hpp"

#include <algorithm>
#include <functional>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The product, or -1 when a size is < 1 or the product passes 2^31.
std::int64_t device_count(const std::vector<std::int64_t>& shape) {
  std::int64_t product = 1;
  for (std::int64_t size : shape) {
    if (size < 1 || product > (std::int64_t{1} << 31) / size) return -1;
    product *= size;
  }
  return product;
}

}  // namespace

Mesh create_device_mesh(const std::vector<std::int64_t>& shape,
                        const std::vector<std::string>& names,
                        const std::optional<std::vector<DeviceId>>& devices) {
  const std::int64_t needed = device_count(shape);
  if (needed < 0) {
    throw InvalidArgument("mesh shape " + shape_text(shape) +
                          " has a size below 1 or too many devices");
  }
  if (!devices) return Mesh(names, shape);
  if (static_cast<std::int64_t>(devices->size()) < needed) {
    throw InvalidArgument("mesh shape " + shape_text(shape) + " needs " + std::to_string(needed) +
                          " devices but only " + std::to_string(devices->size()) +
                          " are available");
  }
  return Mesh(names, shape, std::vector<DeviceId>(devices->begin(), devices->begin() + needed));
}

DeviceMeshManager::DeviceMeshManager(std::int64_t num_devices) {
  if (num_devices < 1) {
    throw InvalidArgument("DeviceMeshManager num_devices is " + std::to_string(num_devices) +
                          "; expected at least 1");
  }
  devices_.resize(static_cast<std::size_t>(num_devices));
  for (std::size_t i = 0; i < devices_.size(); ++i) devices_[i] = static_cast<DeviceId>(i);
}

DeviceMeshManager::DeviceMeshManager(std::vector<DeviceId> devices) : devices_(std::move(devices)) {
  if (devices_.empty()) throw InvalidArgument("DeviceMeshManager needs at least one device");
  // A one-axis mesh over them checks the ids (>= 0, no repeats).
  (void)Mesh({"devices"}, {static_cast<std::int64_t>(devices_.size())}, devices_);
}

Mesh DeviceMeshManager::create_mesh(const std::vector<std::int64_t>& shape,
                                    const std::vector<std::string>& names) const {
  return create_device_mesh(shape, names, devices_);
}

Mesh DeviceMeshManager::create_mesh_from_config(const ParallelismConfig& config) const {
  config.validate();
  return create_mesh(config.mesh_shape, config.mesh_axis_names);
}

std::vector<std::int64_t> get_optimal_mesh_shape(std::int64_t n, std::int64_t num_dims) {
  if (n < 1) throw InvalidArgument("device count is " + std::to_string(n) + "; expected >= 1");
  if (num_dims < 1) {
    throw InvalidArgument("mesh dimensions is " + std::to_string(num_dims) + "; expected >= 1");
  }
  // Every factor divides n: walk n's divisors (largest first) instead of every integer.
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      divisors.push_back(d);
      if (d != n / d) divisors.push_back(n / d);
    }
  }
  std::sort(divisors.rbegin(), divisors.rend());
  std::vector<std::int64_t> best;
  std::vector<std::int64_t> current;
  // Factors in non-increasing order; compare by largest factor, then by spread.
  std::function<void(std::int64_t, std::int64_t)> search = [&](std::int64_t rest,
                                                               std::int64_t limit) {
    if (static_cast<std::int64_t>(current.size()) == num_dims - 1) {
      if (rest > limit) return;
      current.push_back(rest);
      const auto key = [](const std::vector<std::int64_t>& f) {
        return std::make_pair(f.front(), f.front() - f.back());
      };
      if (best.empty() || key(current) < key(best)) best = current;
      current.pop_back();
      return;
    }
    for (std::int64_t factor : divisors) {
      if (factor > limit || rest % factor != 0) continue;
      current.push_back(factor);
      search(rest / factor, factor);
      current.pop_back();
    }
  };
  search(n, n);
  return best;
}

bool validate_mesh_config(const std::vector<std::int64_t>& shape, std::int64_t num_devices) {
  return !shape.empty() && device_count(shape) == num_devices;
}

void check_mesh_config(const std::vector<std::int64_t>& shape, std::int64_t num_devices) {
  if (shape.empty()) throw InvalidArgument("mesh shape is empty; expected at least one axis");
  const std::int64_t count = device_count(shape);
  if (count < 0) {
    throw InvalidArgument("mesh shape " + shape_text(shape) +
                          " has a size below 1 or too many devices");
  }
  if (count != num_devices) {
    throw InvalidArgument("mesh shape " + shape_text(shape) + " has " + std::to_string(count) +
                          " devices, not " + std::to_string(num_devices));
  }
}

}  // namespace shardwise
