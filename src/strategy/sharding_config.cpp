#include "shardwise/strategy/sharding_config.hpp"

#include <algorithm>
#include <cmath>

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"

namespace shardwise {
namespace {

void require_positive(const char* field, std::int64_t value) {
  if (value < 1) {
    throw InvalidArgument("ShardingConfig." + std::string(field) + " is " + std::to_string(value) +
                          "; expected a size >= 1");
  }
}

std::int64_t integer_sqrt(std::int64_t n) {
  auto root = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
  while (root * root > n) --root;
  while ((root + 1) * (root + 1) <= n) ++root;
  return root;
}

}  // namespace

std::int64_t ShardingConfig::get_total_device_count() const {
  // Checked: the degrees of an unvalidated config may be anything.
  std::int64_t total = 1;
  for (const std::int64_t degree : {data_parallel_size, fsdp_parallel_size, expert_parallel_size,
                                    tensor_parallel_size, pipeline_parallel_size}) {
    if (degree < 1 || __builtin_mul_overflow(total, degree, &total)) {
      throw InvalidArgument("ShardingConfig's degrees (" + to_string() +
                            ") do not multiply to a device count");
    }
  }
  return total;
}

std::string ShardingConfig::fsdp_axis_name() const {
  return fsdp_parallel_size > 1 ? "fsdp" : "data";
}

void ShardingConfig::validate() const {
  require_positive("data_parallel_size", data_parallel_size);
  require_positive("tensor_parallel_size", tensor_parallel_size);
  require_positive("pipeline_parallel_size", pipeline_parallel_size);
  require_positive("fsdp_parallel_size", fsdp_parallel_size);
  require_positive("expert_parallel_size", expert_parallel_size);
  if (fsdp_min_weight_size < 0) {
    throw InvalidArgument("ShardingConfig.fsdp_min_weight_size is " +
                          std::to_string(fsdp_min_weight_size) + "; expected a size >= 0");
  }
  // No mesh holds more devices (and their product stays exact).
  std::int64_t total = 1;
  for (const std::int64_t degree : {data_parallel_size, fsdp_parallel_size, expert_parallel_size,
                                    tensor_parallel_size, pipeline_parallel_size}) {
    if (__builtin_mul_overflow(total, degree, &total) || total > Mesh::kMaxDevices) {
      throw InvalidArgument("ShardingConfig's degrees multiply to more than " +
                            std::to_string(Mesh::kMaxDevices) + " devices (" + to_string() + ")");
    }
  }
  if (fsdp_parallel_size > 1 && !fsdp_enabled) {
    throw InvalidArgument("ShardingConfig.fsdp_parallel_size is " +
                          std::to_string(fsdp_parallel_size) +
                          " but fsdp_enabled is false; enable FSDP or set the size to 1");
  }
}

ShardingConfig ShardingConfig::from_device_count(std::int64_t n) {
  if (n < 1) {
    throw InvalidArgument("device count is " + std::to_string(n) + "; expected at least 1");
  }
  ShardingConfig config;
  if (n == 1) return config;
  if (n <= 4) {
    config.data_parallel_size = n;
    return config;
  }
  if (n == 8) {
    config.data_parallel_size = 2;
    config.tensor_parallel_size = 4;
    return config;
  }
  // The reference takes tensor = min(8, floor(sqrt(n))) and data = floor(n / tensor), which
  // leaves devices unused when tensor does not divide n; the largest divisor below it never does.
  std::int64_t tensor = std::min<std::int64_t>(8, integer_sqrt(n));
  while (n % tensor != 0) --tensor;
  config.tensor_parallel_size = tensor;
  config.data_parallel_size = n / tensor;
  return config;
}

namespace detail {

ShardingConfig sharding_config_from_json(const nlohmann::json& json, const std::string& path) {
  JsonObjectReader reader(json, path);
  ShardingConfig config;
  config.data_parallel_size = reader.integer("data_parallel_size", config.data_parallel_size);
  config.tensor_parallel_size = reader.integer("tensor_parallel_size", config.tensor_parallel_size);
  config.pipeline_parallel_size =
      reader.integer("pipeline_parallel_size", config.pipeline_parallel_size);
  config.fsdp_enabled = reader.boolean("fsdp_enabled", config.fsdp_enabled);
  config.fsdp_min_weight_size = reader.integer("fsdp_min_weight_size", config.fsdp_min_weight_size);
  config.fsdp_parallel_size = reader.integer("fsdp_parallel_size", config.fsdp_parallel_size);
  config.expert_parallel_size = reader.integer("expert_parallel_size", config.expert_parallel_size);
  reader.finish();
  config.validate();
  return config;
}

}  // namespace detail

ShardingConfig ShardingConfig::from_json(std::string_view text) {
  return detail::sharding_config_from_json(detail::parse_json(text, "sharding config"), "");
}

std::string ShardingConfig::to_json() const {
  nlohmann::ordered_json json = {
      {"data_parallel_size", data_parallel_size},
      {"tensor_parallel_size", tensor_parallel_size},
      {"pipeline_parallel_size", pipeline_parallel_size},
      {"fsdp_enabled", fsdp_enabled},
      {"fsdp_min_weight_size", fsdp_min_weight_size},
      {"fsdp_parallel_size", fsdp_parallel_size},
  };
  // Written only where it splits, so that the reference module's configs read back unchanged.
  if (expert_parallel_size != 1) json["expert_parallel_size"] = expert_parallel_size;
  return json.dump();
}

std::string ShardingConfig::to_string() const {
  return "ShardingConfig(data=" + std::to_string(data_parallel_size) +
         ", fsdp=" + std::to_string(fsdp_parallel_size) +
         (expert_parallel_size != 1 ? ", expert=" + std::to_string(expert_parallel_size) : "") +
         ", tensor=" + std::to_string(tensor_parallel_size) +
         ", pipeline=" + std::to_string(pipeline_parallel_size) +
         ", fsdp_enabled=" + (fsdp_enabled ? "true" : "false") +
         ", fsdp_min_weight_size=" + std::to_string(fsdp_min_weight_size) + ")";
}

}  // namespace shardwise
