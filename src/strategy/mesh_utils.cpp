#include "shardwise/strategy/mesh_utils.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <system_error>

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
  if (num_devices < 1 || num_devices > Mesh::kMaxDevices) {
    throw InvalidArgument("DeviceMeshManager num_devices is " + std::to_string(num_devices) +
                          "; expected 1 to " + std::to_string(Mesh::kMaxDevices));
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
  if (num_dims < 1 || num_dims > static_cast<std::int64_t>(Mesh::kMaxAxes)) {
    throw InvalidArgument("mesh dimensions is " + std::to_string(num_dims) + "; expected 1 to " +
                          std::to_string(Mesh::kMaxAxes));
  }
  if (n > Mesh::kMaxDevices) {
    throw InvalidArgument("device count is " + std::to_string(n) + "; expected at most " +
                          std::to_string(Mesh::kMaxDevices));
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

namespace {

// Billions of parameters in "7B", "350M", "1.5b".
double billions_of_parameters(const std::string& text) {
  const auto bad = [&] {
    return InvalidArgument("model size '" + text +
                           "' is not a positive number of billions or millions of parameters "
                           "('7B', '350M')");
  };
  if (text.size() < 2) throw bad();
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (unit != 'B' && unit != 'M') throw bad();
  double value = 0;
  const char* end = text.data() + text.size() - 1;
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value) || value <= 0) throw bad();
  return unit == 'B' ? value : value / 1000;
}

// The largest divisor of n that is at most `limit` (>= 1).
std::int64_t largest_divisor_up_to(std::int64_t n, std::int64_t limit) {
  std::int64_t d = std::max<std::int64_t>(1, std::min(limit, n));
  while (n % d != 0) --d;
  return d;
}

}  // namespace

TransformerMeshSuggestion optimize_for_transformer(std::int64_t num_devices,
                                                   const std::string& model_size,
                                                   std::int64_t sequence_length) {
  if (num_devices < 1) {
    throw InvalidArgument("device count is " + std::to_string(num_devices) +
                          "; expected at least 1");
  }
  if (sequence_length < 1) {
    throw InvalidArgument("sequence length is " + std::to_string(sequence_length) +
                          "; expected at least 1");
  }
  const double billions = billions_of_parameters(model_size);
  const std::int64_t n = num_devices;
  std::int64_t tensor = 1;
  if (billions < 1) {
    tensor = n <= 8 ? 1 : largest_divisor_up_to(n, n / 8);
  } else if (billions < 10) {
    tensor = n <= 4 ? 1 : largest_divisor_up_to(n, std::min<std::int64_t>(4, n / 2));
  } else {
    tensor = largest_divisor_up_to(n, std::min<std::int64_t>(8, std::max<std::int64_t>(1, n / 2)));
  }
  ShardingConfig sharding;
  sharding.data_parallel_size = n / tensor;
  sharding.tensor_parallel_size = tensor;
  return {ParallelismConfig::from_sharding_config(sharding),
          "a heuristic on the parameter count alone (the reference's optimize_for_transformer): "
          "it does not check that the model fits, and the sequence length does not change it; "
          "the planner answers from memory and step time"};
}

}  // namespace shardwise
