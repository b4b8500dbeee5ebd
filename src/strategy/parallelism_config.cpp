#include "shardwise/strategy/parallelism_config.hpp"

#include <algorithm>

#include "detail/config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string list_text(const std::vector<std::int64_t>& values) {
  std::string text = "(";
  for (std::size_t i = 0; i < values.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(values[i]);
  }
  return text + (values.size() == 1 ? ",)" : ")");
}

// A degree > 1 needs its axis with exactly that size; a degree of 1 allows only size 1.
void check_degree(const ParallelismConfig& config, std::string_view axis, const char* field,
                  std::int64_t degree) {
  const auto& names = config.mesh_axis_names;
  auto it = std::find(names.begin(), names.end(), axis);
  const std::int64_t size =
      it == names.end() ? 1 : config.mesh_shape[static_cast<std::size_t>(it - names.begin())];
  if (size == degree) return;
  if (it == names.end()) {
    throw InvalidArgument("ParallelismConfig.mesh_axis_names has no '" + std::string(axis) +
                          "' axis for sharding_config." + field + " = " + std::to_string(degree));
  }
  throw InvalidArgument("ParallelismConfig mesh axis '" + std::string(axis) + "' has size " +
                        std::to_string(size) + " but sharding_config." + field + " is " +
                        std::to_string(degree));
}

}  // namespace

bool ParallelismConfig::is_valid() const {
  try {
    validate();
    return true;
  } catch (const Error&) {
    return false;
  }
}

void ParallelismConfig::validate() const {
  sharding_config.validate();
  if (mesh_shape.size() != mesh_axis_names.size()) {
    throw InvalidArgument("ParallelismConfig.mesh_shape has " + std::to_string(mesh_shape.size()) +
                          " sizes but mesh_axis_names has " +
                          std::to_string(mesh_axis_names.size()) + " names");
  }
  // The mesh checks names (non-empty, unique, identifiers) and sizes (>= 1).
  try {
    (void)Mesh(mesh_axis_names, mesh_shape);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("ParallelismConfig: ") + e.what());
  }
  std::int64_t product = 1;
  for (std::int64_t size : mesh_shape) product *= size;
  if (product != sharding_config.get_total_device_count()) {
    throw InvalidArgument("ParallelismConfig.mesh_shape " + list_text(mesh_shape) + " has " +
                          std::to_string(product) + " devices but " + sharding_config.to_string() +
                          " needs " + std::to_string(sharding_config.get_total_device_count()));
  }
  check_degree(*this, kDataAxis, "data_parallel_size", sharding_config.data_parallel_size);
  check_degree(*this, kFsdpAxis, "fsdp_parallel_size", sharding_config.fsdp_parallel_size);
  check_degree(*this, kExpertAxis, "expert_parallel_size", sharding_config.expert_parallel_size);
  check_degree(*this, kModelAxis, "tensor_parallel_size", sharding_config.tensor_parallel_size);
  check_degree(*this, kPipelineAxis, "pipeline_parallel_size",
               sharding_config.pipeline_parallel_size);
}

ParallelismConfig ParallelismConfig::from_sharding_config(const ShardingConfig& config) {
  config.validate();
  ParallelismConfig out;
  out.sharding_config = config;
  auto add = [&](std::string_view name, std::int64_t size) {
    if (size > 1) {
      out.mesh_shape.push_back(size);
      out.mesh_axis_names.emplace_back(name);
    }
  };
  add(kPipelineAxis, config.pipeline_parallel_size);
  add(kDataAxis, config.data_parallel_size);
  add(kFsdpAxis, config.fsdp_parallel_size);
  add(kExpertAxis, config.expert_parallel_size);
  add(kModelAxis, config.tensor_parallel_size);
  if (out.mesh_shape.empty()) {
    out.mesh_shape = {1};
    out.mesh_axis_names = {std::string(kDataAxis)};
  }
  return out;
}

ParallelismConfig ParallelismConfig::from_mesh(const Mesh& mesh, bool fsdp_on_data) {
  ParallelismConfig out;
  out.mesh_shape = mesh.axis_sizes();
  out.mesh_axis_names = mesh.axis_names();
  ShardingConfig& sc = out.sharding_config;
  for (std::size_t a = 0; a < mesh.num_axes(); ++a) {
    const std::string& name = mesh.axis_names()[a];
    const std::int64_t size = mesh.axis_sizes()[a];
    if (name == kDataAxis) {
      sc.data_parallel_size = size;
    } else if (name == kFsdpAxis) {
      sc.fsdp_parallel_size = size;
      sc.fsdp_enabled = true;
    } else if (name == kModelAxis) {
      sc.tensor_parallel_size = size;
    } else if (name == kPipelineAxis) {
      sc.pipeline_parallel_size = size;
    } else if (name == kExpertAxis) {
      sc.expert_parallel_size = size;
    } else if (size > 1) {
      throw InvalidArgument("mesh axis '" + name +
                            "' is not one of data, fsdp, expert, model, pipeline; give rules that "
                            "use it");
    }
  }
  if (fsdp_on_data) sc.fsdp_enabled = true;
  out.validate();
  return out;
}

Mesh ParallelismConfig::to_mesh(std::optional<std::vector<DeviceId>> device_ids) const {
  validate();
  return Mesh(mesh_axis_names, mesh_shape, std::move(device_ids));
}

ParallelismConfig ParallelismConfig::from_json(std::string_view text) {
  const nlohmann::json json = detail::parse_json(text, "parallelism config");
  detail::JsonObjectReader reader(json, "");
  ParallelismConfig config;
  config.mesh_shape = detail::json_integer_list(reader.required("mesh_shape"), "mesh_shape");
  config.mesh_axis_names =
      detail::json_string_list(reader.required("mesh_axis_names"), "mesh_axis_names");
  if (const nlohmann::json* sharding = reader.optional("sharding_config")) {
    config.sharding_config = detail::sharding_config_from_json(*sharding, "sharding_config");
  }
  reader.finish();
  config.validate();
  return config;
}

std::string ParallelismConfig::to_json() const {
  nlohmann::ordered_json json = {
      {"mesh_shape", mesh_shape},
      {"mesh_axis_names", mesh_axis_names},
      {"sharding_config", nlohmann::ordered_json::parse(sharding_config.to_json())},
  };
  return json.dump();
}

}  // namespace shardwise
