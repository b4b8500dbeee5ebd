// The reference module's classes by their own names: ShardingConfig, ParallelismConfig, the
// strategies with every method the reference lists, MultiDimensionalStrategy, the mesh
// utilities. An axis a combination cannot place is never dropped in silence: the methods that
// answer with a spec warn (shardwise.ShardingWarning) for each dropped axis, and the resolve_*
// methods return the whole SpecResolution (spec, notes, dropped axes).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "conversions.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/expert_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/mesh_utils.hpp"
#include "shardwise/strategy/multi_dimensional_strategy.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"
#include "strategy_configs.hpp"

namespace shardwise::python {
namespace {

// The warning type. The bindings hold a reference of their own for the interpreter's life (a
// user may delete the module's attribute; the type must outlive every warning).
PyObject* sharding_warning = nullptr;

// The spec (JAX's where JAX is installed), after a ShardingWarning for each note that drops an
// axis.
nb::object warned(const SpecResolution& resolution) {
  if (!resolution.dropped_axes.empty()) {
    for (const std::string& note : resolution.notes) {
      if (PyErr_WarnEx(sharding_warning, note.c_str(), 2) != 0) throw nb::python_error();
    }
  }
  return spec_to_python(resolution.spec);
}

std::string mesh_axis_text(const ShardingStrategy& s) {
  return s.mesh_axis() ? std::to_string(*s.mesh_axis()) : "None";
}

std::string optional_text(const std::optional<std::string>& value) {
  return value ? "'" + *value + "'" : "None";
}

std::optional<Shape> optional_shape(nb::handle shape) {
  if (shape.is_none()) return std::nullopt;
  return shape_from(shape, "shape");
}

void bind_results(nb::module_& m) {
  nb::class_<SpecResolution>(m, "SpecResolution",
                             "A spec with a note for every axis moved or dropped, and why.")
      .def_prop_ro(
          "spec", [](const SpecResolution& r) { return spec_to_python(r.spec); },
          "jax.sharding.PartitionSpec where JAX is installed, else shardwise's.")
      .def_ro("notes", &SpecResolution::notes)
      .def_ro("dropped_axes", &SpecResolution::dropped_axes)
      .def("__repr__", [](const SpecResolution& r) {
        std::string notes;
        for (const std::string& note : r.notes) notes += (notes.empty() ? "'" : ", '") + note + "'";
        return "SpecResolution(spec=" + r.spec.to_string() + ", notes=[" + notes + "])";
      });
  nb::class_<ParameterPlacement>(m, "ParameterPlacement",
                                 "A parameter's logical axes, spec and pipeline stage.")
      .def_ro("logical_axes", &ParameterPlacement::logical_axes)
      .def_prop_ro(
          "spec", [](const ParameterPlacement& p) { return spec_to_python(p.spec); },
          "jax.sharding.PartitionSpec where JAX is installed, else shardwise's.")
      .def_ro("stage", &ParameterPlacement::stage)
      .def_ro("notes", &ParameterPlacement::notes)
      .def_ro("dropped_axes", &ParameterPlacement::dropped_axes)
      .def("__repr__", [](const ParameterPlacement& p) {
        return "ParameterPlacement(spec=" + p.spec.to_string() +
               ", stage=" + std::to_string(p.stage) + ")";
      });
}

void bind_strategies(nb::module_& m) {
  nb::class_<ShardingStrategy>(m, "ShardingStrategy",
                               "A strategy: logical dimension names to one mesh axis.")
      .def_prop_ro("axis_name", &ShardingStrategy::axis_name)
      .def_prop_ro("mesh_axis", &ShardingStrategy::mesh_axis)
      .def(
          "get_partition_spec",
          [](const ShardingStrategy& s, nb::handle dim_names) {
            return spec_to_python(s.get_partition_spec(axes_from(dim_names, "dim_names")));
          },
          nb::arg("dim_names"))
      .def("get_sharding_constraints",
           [](const ShardingStrategy& s) {
             const ShardingConstraints c = s.get_sharding_constraints();
             nb::dict d;
             d["axis_name"] = c.axis_name;
             d["mesh_axis"] = c.mesh_axis ? nb::cast(*c.mesh_axis) : nb::none();
             return d;
           })
      .def(
          "sharding_for",
          [](const ShardingStrategy& s, nb::handle shape, const Mesh& mesh) {
            return s.apply_sharding(shape_from(shape, "shape"), mesh);
          },
          nb::arg("shape"), nb::arg("mesh"),
          "The NamedSharding apply_sharding places an array of `shape` with.")
      .def("logical_axis_rules", [](const ShardingStrategy& s) {
        nb::list rules;
        // Held by name: a range-for over a temporary's member dangles (C++20).
        const LogicalAxisRules held = s.logical_axis_rules();
        for (const LogicalAxisRule& rule : held.rules()) {
          rules.append(nb::make_tuple(rule.logical_name, rule.mesh_axes));
        }
        return rules;
      });

  nb::class_<DataParallelStrategy, ShardingStrategy>(m, "DataParallelStrategy")
      .def(
          "__init__",
          [](DataParallelStrategy* self, nb::str axis_name, nb::handle mesh_axis) {
            new (self)
                DataParallelStrategy(text_from(axis_name, "axis_name"), mesh_axis_from(mesh_axis));
          },
          nb::arg("axis_name") = "data", nb::arg("mesh_axis") = nb::none())
      .def("__repr__", [](const DataParallelStrategy& s) {
        return "DataParallelStrategy(axis_name='" + s.axis_name() +
               "', mesh_axis=" + mesh_axis_text(s) + ")";
      });

  nb::class_<ExpertParallelStrategy, ShardingStrategy>(m, "ExpertParallelStrategy")
      .def(
          "__init__",
          [](ExpertParallelStrategy* self, nb::str axis_name, nb::handle mesh_axis) {
            new (self) ExpertParallelStrategy(text_from(axis_name, "axis_name"),
                                              mesh_axis_from(mesh_axis));
          },
          nb::arg("axis_name") = "expert", nb::arg("mesh_axis") = nb::none())
      .def("__repr__", [](const ExpertParallelStrategy& s) {
        return "ExpertParallelStrategy(axis_name='" + s.axis_name() +
               "', mesh_axis=" + mesh_axis_text(s) + ")";
      });

  nb::class_<FSDPStrategy, ShardingStrategy>(m, "FSDPStrategy")
      .def(
          "__init__",
          [](FSDPStrategy* self, nb::str axis_name, nb::handle mesh_axis,
             nb::handle min_weight_size, nb::str fallback) {
            new (self) FSDPStrategy(text_from(axis_name, "axis_name"), mesh_axis_from(mesh_axis),
                                    int_from(min_weight_size, "min_weight_size"),
                                    fsdp_fallback_from(text_from(fallback, "fallback")));
          },
          nb::arg("axis_name") = "fsdp", nb::arg("mesh_axis") = nb::none(),
          nb::arg("min_weight_size") = 1024, nb::arg("fallback") = "replicate")
      .def("__repr__",
           [](const FSDPStrategy& s) {
             return "FSDPStrategy(axis_name='" + s.axis_name() +
                    "', mesh_axis=" + mesh_axis_text(s) +
                    ", min_weight_size=" + std::to_string(s.min_weight_size()) + ", fallback='" +
                    to_text(s.fallback()) + "')";
           })
      .def_prop_ro("min_weight_size", &FSDPStrategy::min_weight_size)
      .def_prop_ro("fallback", [](const FSDPStrategy& s) { return to_text(s.fallback()); })
      .def(
          "should_shard_weight",
          [](const FSDPStrategy& s, nb::handle weight) {
            return s.should_shard_weight(shape_from(weight, "weight"));
          },
          nb::arg("weight"), "weight: an array or its shape.")
      .def(
          "get_gradient_partition_spec",
          [](const FSDPStrategy& s, nb::handle dim_names) {
            return spec_to_python(s.get_gradient_partition_spec(axes_from(dim_names, "dim_names")));
          },
          nb::arg("dim_names"));

  nb::class_<TensorParallelStrategy, ShardingStrategy>(m, "TensorParallelStrategy")
      .def(
          "__init__",
          [](TensorParallelStrategy* self, nb::str axis_name, nb::handle mesh_axis,
             std::optional<nb::str> shard_dimension, nb::str layout) {
            new (self) TensorParallelStrategy(
                text_from(axis_name, "axis_name"), mesh_axis_from(mesh_axis),
                shard_dimension ? std::optional(text_from(*shard_dimension, "shard_dimension"))
                                : std::nullopt,
                weight_layout_from(text_from(layout, "layout")));
          },
          nb::arg("axis_name") = "model", nb::arg("mesh_axis") = nb::none(),
          nb::arg("shard_dimension") = nb::none(), nb::arg("layout") = "out_in")
      .def("__repr__",
           [](const TensorParallelStrategy& s) {
             return "TensorParallelStrategy(axis_name='" + s.axis_name() +
                    "', mesh_axis=" + mesh_axis_text(s) +
                    ", shard_dimension=" + optional_text(s.shard_dimension()) + ", layout='" +
                    to_text(s.layout()) + "')";
           })
      .def_prop_ro("shard_dimension", &TensorParallelStrategy::shard_dimension)
      .def_prop_ro("layout", [](const TensorParallelStrategy& s) { return to_text(s.layout()); })
      .def(
          "get_linear_weight_spec",
          [](const TensorParallelStrategy& s, std::optional<nb::str> kind) {
            return spec_to_python(
                kind ? s.get_linear_weight_spec(linear_kind_from(text_from(*kind, "kind")))
                     : s.get_linear_weight_spec());
          },
          nb::arg("kind") = nb::none(),
          "kind: 'column' or 'row' (Megatron's parallel linear layers in this strategy's "
          "layout); without it, the reference's answer from shard_dimension.")
      .def("get_attention_qkv_spec",
           [](const TensorParallelStrategy& s) {
             return spec_to_python(s.get_attention_qkv_spec());
           })
      .def("get_attention_output_spec", [](const TensorParallelStrategy& s) {
        return spec_to_python(s.get_attention_output_spec());
      });

  nb::class_<PipelineParallelStrategy, ShardingStrategy>(m, "PipelineParallelStrategy")
      .def(
          "__init__",
          [](PipelineParallelStrategy* self, nb::handle num_stages, nb::str axis_name,
             nb::handle mesh_axis) {
            new (self) PipelineParallelStrategy(int_from(num_stages, "num_stages"),
                                                text_from(axis_name, "axis_name"),
                                                mesh_axis_from(mesh_axis));
          },
          nb::arg("num_stages"), nb::arg("axis_name") = "pipeline",
          nb::arg("mesh_axis") = nb::none())
      .def("__repr__",
           [](const PipelineParallelStrategy& s) {
             return "PipelineParallelStrategy(num_stages=" + std::to_string(s.num_stages()) +
                    ", axis_name='" + s.axis_name() + "', mesh_axis=" + mesh_axis_text(s) + ")";
           })
      .def_prop_ro("num_stages", &PipelineParallelStrategy::num_stages)
      .def(
          "assign_layers_to_stages",
          [](const PipelineParallelStrategy& s, nb::handle num_layers, bool allow_empty) {
            return s.assign_layers_to_stages(int_from(num_layers, "num_layers"), allow_empty);
          },
          nb::arg("num_layers"), nb::arg("allow_empty_stages") = false)
      .def("get_forward_communication_pattern",
           &PipelineParallelStrategy::get_forward_communication_pattern)
      .def("get_backward_communication_pattern",
           &PipelineParallelStrategy::get_backward_communication_pattern);
}

std::vector<MultiDimensionalStrategy::NamedStrategy> named_strategies(nb::handle strategies) {
  if (!nb::isinstance<nb::dict>(strategies)) {
    throw InvalidArgument("strategies is " + repr_text(strategies) +
                          "; expected a dict of name: strategy");
  }
  std::vector<MultiDimensionalStrategy::NamedStrategy> named;
  for (auto [name, strategy] : nb::cast<nb::dict>(strategies)) {
    const std::string key = text_from(nb::str(name), "a key of strategies");
    if (!nb::isinstance<ShardingStrategy>(strategy)) {
      throw InvalidArgument("strategies['" + echo_input(key) + "'] is " + repr_text(strategy) +
                            "; expected a strategy");
    }
    named.emplace_back(key, nb::cast<std::shared_ptr<ShardingStrategy>>(strategy));
  }
  return named;
}

void bind_multi_dimensional(nb::module_& m) {
  nb::class_<MultiDimensionalStrategy>(m, "MultiDimensionalStrategy",
                                       "Strategies by name on one ParallelismConfig, combined "
                                       "per tensor without dropping an axis in silence.")
      .def(
          "__init__",
          [](MultiDimensionalStrategy* self, nb::handle strategies,
             const ParallelismConfig& config) {
            new (self) MultiDimensionalStrategy(named_strategies(strategies), config);
          },
          nb::arg("strategies"), nb::arg("config"))
      .def("__repr__",
           [](const MultiDimensionalStrategy& s) {
             std::string names;
             for (const auto& [name, strategy] : s.strategies()) {
               names += (names.empty() ? "'" : ", '") + name + "'";
             }
             return "MultiDimensionalStrategy(strategies=[" + names +
                    "], mesh=" + s.mesh().to_string() + ")";
           })
      .def_prop_ro("config", &MultiDimensionalStrategy::config)
      .def_prop_ro("mesh", &MultiDimensionalStrategy::mesh)
      .def_prop_ro("strategy_names",
                   [](const MultiDimensionalStrategy& s) {
                     std::vector<std::string> names;
                     for (const auto& [name, strategy] : s.strategies()) names.push_back(name);
                     return names;
                   })
      .def(
          "get_combined_partition_spec",
          [](const MultiDimensionalStrategy& s, nb::str tensor_name, nb::handle dim_names,
             nb::handle shape) {
            return warned(s.get_combined_partition_spec(text_from(tensor_name, "tensor_name"),
                                                        axes_from(dim_names, "dim_names"),
                                                        optional_shape(shape)));
          },
          nb::arg("tensor_name"), nb::arg("dim_names"), nb::arg("shape") = nb::none())
      .def(
          "resolve_combined_partition_spec",
          [](const MultiDimensionalStrategy& s, nb::str tensor_name, nb::handle dim_names,
             nb::handle shape) {
            return s.get_combined_partition_spec(text_from(tensor_name, "tensor_name"),
                                                 axes_from(dim_names, "dim_names"),
                                                 optional_shape(shape));
          },
          nb::arg("tensor_name"), nb::arg("dim_names"), nb::arg("shape") = nb::none(),
          "get_combined_partition_spec with its notes: a SpecResolution.")
      .def(
          "resolve_sharding_conflicts",
          [](const MultiDimensionalStrategy& s, nb::str tensor_name, nb::handle proposed,
             nb::handle shape) {
            return warned(s.resolve_sharding_conflicts(text_from(tensor_name, "tensor_name"),
                                                       proposed_specs(proposed),
                                                       optional_shape(shape)));
          },
          nb::arg("tensor_name"), nb::arg("proposed"), nb::arg("shape") = nb::none(),
          "proposed: {strategy name: spec}.")
      .def(
          "create_partition_spec",
          [](const MultiDimensionalStrategy& s, nb::handle param_shape, nb::str param_name,
             nb::handle num_layers, bool strict) {
            PlacementOptions options;
            options.strict = strict;
            return s.create_partition_spec(
                shape_from(param_shape, "param_shape"), text_from(param_name, "param_name"),
                ParameterNameRules::defaults(), int_from(num_layers, "num_layers"), options);
          },
          nb::arg("param_shape"), nb::arg("param_name"), nb::arg("num_layers"),
          nb::arg("strict") = false,
          "The parameter's logical axes (from its name, by the default rules), spec and "
          "pipeline stage.");
  m.def("default_strategies", &default_strategies, nb::arg("config"),
        "The strategies shardwise uses for a ParallelismConfig: data, fsdp, model, pipeline.");
}

}  // namespace

void bind_strategy(nb::module_& m) {
  sharding_warning =
      PyErr_NewException("shardwise._shardwise.ShardingWarning", PyExc_UserWarning, nullptr);
  m.attr("ShardingWarning") = nb::borrow(sharding_warning);
  bind_configs(m);
  bind_results(m);
  bind_strategies(m);
  bind_multi_dimensional(m);
  bind_mesh_utils(m);
}

}  // namespace shardwise::python
