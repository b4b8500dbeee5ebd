#include "strategy_configs.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "conversions.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/mesh_utils.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_config.hpp"

namespace shardwise::python {
namespace {

std::string bool_text(bool value) { return value ? "True" : "False"; }

std::string repr(const ShardingConfig& c) {
  return "ShardingConfig(data_parallel_size=" + std::to_string(c.data_parallel_size) +
         ", tensor_parallel_size=" + std::to_string(c.tensor_parallel_size) +
         ", pipeline_parallel_size=" + std::to_string(c.pipeline_parallel_size) +
         ", fsdp_enabled=" + bool_text(c.fsdp_enabled) +
         ", fsdp_min_weight_size=" + std::to_string(c.fsdp_min_weight_size) +
         ", fsdp_parallel_size=" + std::to_string(c.fsdp_parallel_size) +
         (c.expert_parallel_size != 1
              ? ", expert_parallel_size=" + std::to_string(c.expert_parallel_size)
              : std::string()) +
         ")";
}

std::string repr(const ParallelismConfig& c) {
  std::string shape, names;
  for (std::size_t i = 0; i < c.mesh_shape.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(c.mesh_shape[i]);
  }
  for (std::size_t i = 0; i < c.mesh_axis_names.size(); ++i) {
    names += (i ? ", '" : "'") + c.mesh_axis_names[i] + "'";
  }
  const char* single = c.mesh_shape.size() == 1 ? "," : "";
  return "ParallelismConfig(mesh_shape=(" + shape + single + "), mesh_axis_names=(" + names +
         (c.mesh_axis_names.size() == 1 ? "," : "") +
         "), sharding_config=" + repr(c.sharding_config) + ")";
}

void bind_sharding_config(nb::module_& m) {
  nb::class_<ShardingConfig>(m, "ShardingConfig",
                             "Parallelism degrees: data, tensor, pipeline, and FSDP (over 'data', "
                             "or over an 'fsdp' axis of fsdp_parallel_size). Checked when made.")
      .def(
          "__init__",
          [](ShardingConfig* self, nb::handle data, nb::handle tensor, nb::handle pipeline,
             bool fsdp_enabled, nb::handle fsdp_min_weight_size, nb::handle fsdp_parallel_size,
             nb::handle expert_parallel_size) {
            ShardingConfig config;
            config.data_parallel_size = int_from(data, "data_parallel_size");
            config.tensor_parallel_size = int_from(tensor, "tensor_parallel_size");
            config.pipeline_parallel_size = int_from(pipeline, "pipeline_parallel_size");
            config.fsdp_enabled = fsdp_enabled;
            config.fsdp_min_weight_size = int_from(fsdp_min_weight_size, "fsdp_min_weight_size");
            config.fsdp_parallel_size = int_from(fsdp_parallel_size, "fsdp_parallel_size");
            config.expert_parallel_size = int_from(expert_parallel_size, "expert_parallel_size");
            config.validate();
            new (self) ShardingConfig(config);
          },
          nb::arg("data_parallel_size") = 1, nb::arg("tensor_parallel_size") = 1,
          nb::arg("pipeline_parallel_size") = 1, nb::arg("fsdp_enabled") = false,
          nb::arg("fsdp_min_weight_size") = 1024, nb::arg("fsdp_parallel_size") = 1,
          nb::arg("expert_parallel_size") = 1)
      .def_ro("data_parallel_size", &ShardingConfig::data_parallel_size)
      .def_ro("tensor_parallel_size", &ShardingConfig::tensor_parallel_size)
      .def_ro("pipeline_parallel_size", &ShardingConfig::pipeline_parallel_size)
      .def_ro("fsdp_enabled", &ShardingConfig::fsdp_enabled)
      .def_ro("fsdp_min_weight_size", &ShardingConfig::fsdp_min_weight_size)
      .def_ro("fsdp_parallel_size", &ShardingConfig::fsdp_parallel_size)
      .def_ro("expert_parallel_size", &ShardingConfig::expert_parallel_size)
      .def("get_total_device_count", &ShardingConfig::get_total_device_count)
      .def_static(
          "from_device_count",
          [](nb::handle n) { return ShardingConfig::from_device_count(int_from(n, "n")); },
          nb::arg("n"), "Degrees whose product is exactly n.")
      .def_static(
          "from_json",
          [](nb::str text) { return ShardingConfig::from_json(text_from(text, "text")); },
          nb::arg("text"))
      .def("to_json", &ShardingConfig::to_json)
      .def("__repr__", [](const ShardingConfig& c) { return repr(c); })
      .def("__hash__", [](const ShardingConfig& c) { return std::hash<std::string>{}(repr(c)); })
      .def("__eq__", [](const ShardingConfig& a, nb::handle b) {
        return nb::isinstance<ShardingConfig>(b) && a == nb::cast<ShardingConfig>(b);
      });
}

void bind_parallelism_config(nb::module_& m) {
  nb::class_<ParallelismConfig>(m, "ParallelismConfig",
                                "A mesh's shape and axis names with the ShardingConfig it "
                                "realises; is_valid() says whether they agree.")
      .def(
          "__init__",
          [](ParallelismConfig* self, nb::handle mesh_shape, nb::handle mesh_axis_names,
             std::optional<ShardingConfig> sharding_config) {
            new (self) ParallelismConfig{ints_from(mesh_shape, "mesh_shape"),
                                         names_from(mesh_axis_names, "mesh_axis_names"),
                                         sharding_config.value_or(ShardingConfig{})};
          },
          nb::arg("mesh_shape"), nb::arg("mesh_axis_names"),
          nb::arg("sharding_config") = nb::none())
      .def_prop_ro("mesh_shape",
                   [](const ParallelismConfig& c) { return nb::tuple(nb::cast(c.mesh_shape)); })
      .def_prop_ro(
          "mesh_axis_names",
          [](const ParallelismConfig& c) { return nb::tuple(nb::cast(c.mesh_axis_names)); })
      .def_ro("sharding_config", &ParallelismConfig::sharding_config)
      .def("is_valid", &ParallelismConfig::is_valid)
      .def("validate", &ParallelismConfig::validate,
           "Raises InvalidArgument naming what disagrees.")
      .def(
          "get_total_device_count",
          [](const ParallelismConfig& c) {
            std::int64_t total = 1;
            for (const std::int64_t size : c.mesh_shape) {
              if (size < 1 || __builtin_mul_overflow(total, size, &total)) {
                throw InvalidArgument("ParallelismConfig.mesh_shape " + repr(c) +
                                      " holds no device count: a size below 1, or a product "
                                      "past 2**63");
              }
            }
            return total;
          },
          "The devices of the mesh: the product of mesh_shape.")
      .def_static("from_sharding_config", &ParallelismConfig::from_sharding_config,
                  nb::arg("config"))
      .def_static(
          "from_device_count",
          [](nb::handle n) {
            return ParallelismConfig::from_sharding_config(
                ShardingConfig::from_device_count(int_from(n, "n")));
          },
          nb::arg("n"))
      .def(
          "to_mesh",
          [](const ParallelismConfig& c, nb::handle devices) {
            std::optional<std::vector<DeviceId>> ids;
            if (!devices.is_none()) ids = ints_from(devices, "devices");
            return c.to_mesh(ids);
          },
          nb::arg("devices") = nb::none())
      .def_static(
          "from_json",
          [](nb::str text) { return ParallelismConfig::from_json(text_from(text, "text")); },
          nb::arg("text"))
      .def("to_json", &ParallelismConfig::to_json)
      .def("__repr__", [](const ParallelismConfig& c) { return repr(c); })
      .def("__hash__", [](const ParallelismConfig& c) { return std::hash<std::string>{}(repr(c)); })
      .def("__eq__", [](const ParallelismConfig& a, nb::handle b) {
        return nb::isinstance<ParallelismConfig>(b) && a == nb::cast<ParallelismConfig>(b);
      });
}

}  // namespace

void bind_configs(nb::module_& m) {
  bind_sharding_config(m);
  bind_parallelism_config(m);
}

void bind_mesh_utils(nb::module_& m) {
  m.def(
      "create_device_mesh",
      [](nb::handle shape, nb::handle names, nb::handle devices) {
        std::optional<std::vector<DeviceId>> ids;
        if (!devices.is_none()) ids = ints_from(devices, "devices");
        return create_device_mesh(ints_from(shape, "shape"), names_from(names, "names"), ids);
      },
      nb::arg("shape"), nb::arg("names"), nb::arg("devices") = nb::none());
  nb::class_<DeviceMeshManager>(m, "DeviceMeshManager",
                                "Meshes over a set of devices: a count (ids 0..n-1) or ids.")
      .def(
          "__init__",
          [](DeviceMeshManager* self, nb::handle devices) {
            // A count (a Python or NumPy int), or a sequence of ids.
            if (PyIndex_Check(devices.ptr()) && !nb::isinstance<nb::tuple>(devices) &&
                !nb::isinstance<nb::list>(devices)) {
              new (self) DeviceMeshManager(int_from(devices, "devices"));
            } else {
              new (self) DeviceMeshManager(ints_from(devices, "devices"));
            }
          },
          nb::arg("devices"))
      .def_prop_ro("num_devices", &DeviceMeshManager::num_devices)
      .def(
          "create_mesh",
          [](const DeviceMeshManager& manager, nb::handle shape, nb::handle names) {
            return manager.create_mesh(ints_from(shape, "shape"), names_from(names, "names"));
          },
          nb::arg("shape"), nb::arg("names"))
      .def("create_mesh_from_config", &DeviceMeshManager::create_mesh_from_config,
           nb::arg("config"));
  m.def(
      "get_optimal_mesh_shape",
      [](nb::handle n, nb::handle num_dims) {
        return get_optimal_mesh_shape(int_from(n, "n"), int_from(num_dims, "num_dims"));
      },
      nb::arg("n"), nb::arg("num_dims"), "Balanced factors whose product is exactly n.");
  m.def(
      "validate_mesh_config",
      [](nb::handle shape, nb::handle n) {
        return validate_mesh_config(ints_from(shape, "shape"), int_from(n, "num_devices"));
      },
      nb::arg("shape"), nb::arg("num_devices"));
  m.def(
      "optimize_for_transformer",
      [](nb::handle n, nb::str model_size, nb::handle seq) {
        const TransformerMeshSuggestion s = optimize_for_transformer(
            int_from(n, "num_devices"), text_from(model_size, "model_size"),
            int_from(seq, "sequence_length"));
        return nb::make_tuple(s.config, s.note);
      },
      nb::arg("num_devices"), nb::arg("model_size"), nb::arg("sequence_length"),
      "(ParallelismConfig, note): the reference's size heuristic; shardwise.search answers "
      "the question from the model, the cluster and the batch.");
}

FsdpFallback fsdp_fallback_from(const std::string& text) {
  if (text == "replicate") return FsdpFallback::kReplicate;
  if (text == "shard_other_dimension") return FsdpFallback::kShardOtherDimension;
  if (text == "shard_other_dimension_else_uneven") {
    return FsdpFallback::kShardOtherDimensionElseUneven;
  }
  throw InvalidArgument("fallback is '" + echo_input(text) +
                        "'; expected replicate, shard_other_dimension or "
                        "shard_other_dimension_else_uneven");
}

std::string to_text(FsdpFallback fallback) {
  switch (fallback) {
    case FsdpFallback::kReplicate: return "replicate";
    case FsdpFallback::kShardOtherDimension: return "shard_other_dimension";
    case FsdpFallback::kShardOtherDimensionElseUneven: return "shard_other_dimension_else_uneven";
  }
  return "replicate";
}

WeightLayout weight_layout_from(const std::string& text) {
  if (text == "out_in") return WeightLayout::kOutIn;
  if (text == "in_out") return WeightLayout::kInOut;
  throw InvalidArgument("layout is '" + echo_input(text) +
                        "'; expected out_in (PyTorch's nn.Linear) or in_out (Flax's Dense)");
}

std::string to_text(WeightLayout layout) {
  return layout == WeightLayout::kOutIn ? "out_in" : "in_out";
}

LinearKind linear_kind_from(const std::string& text) {
  if (text == "column") return LinearKind::kColumnParallel;
  if (text == "row") return LinearKind::kRowParallel;
  throw InvalidArgument("kind is '" + echo_input(text) + "'; expected column or row");
}

std::map<std::string, PartitionSpec> proposed_specs(nb::handle proposed) {
  if (!nb::isinstance<nb::dict>(proposed)) {
    throw InvalidArgument("proposed is " + repr_text(proposed) +
                          "; expected a dict of strategy name: spec");
  }
  std::map<std::string, PartitionSpec> specs;
  for (auto [name, spec] : nb::cast<nb::dict>(proposed)) {
    const std::string key = text_from(nb::str(name), "a key of proposed");
    specs.emplace(key, spec_from(spec, "proposed['" + echo_input(key) + "']"));
  }
  return specs;
}

}  // namespace shardwise::python
