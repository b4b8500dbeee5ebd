// Mesh, PartitionSpec, NamedSharding and DTensor-style placements, as JAX and PyTorch users
// spell them: Mesh({'data': 2, 'model': 4}), P('data', None, ('fsdp', 'model')),
// NamedSharding(mesh, spec).devices_indices_map(shape) giving JAX's dict of slices.
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <functional>

#include "bindings.hpp"
#include "conversions.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/placement.hpp"

namespace shardwise::python {
namespace {

nb::tuple to_tuple(const std::vector<std::int64_t>& values) {
  nb::list list;
  for (const std::int64_t value : values) list.append(nb::int_(value));
  return nb::tuple(list);
}

nb::tuple to_tuple(const std::vector<std::string>& values) {
  nb::list list;
  for (const std::string& value : values) list.append(nb::str(value.c_str()));
  return nb::tuple(list);
}

// Mesh({'data': 2, 'model': 4}) or Mesh((2, 4), ('data', 'model'), devices=[...]).
Mesh make_mesh(nb::handle shape, nb::handle axis_names, nb::handle devices) {
  std::vector<std::string> names;
  std::vector<std::int64_t> sizes;
  if (!nb::isinstance<nb::dict>(shape) && !nb::isinstance<nb::tuple>(shape) &&
      !nb::isinstance<nb::list>(shape)) {
    throw InvalidArgument("shape is " + repr_text(shape) +
                          "; expected {'data': 2, 'model': 4} or a tuple of sizes");
  }
  if (nb::isinstance<nb::dict>(shape)) {
    if (!axis_names.is_none()) {
      throw InvalidArgument("axis_names is given twice: by the dict's keys and by axis_names");
    }
    for (auto [name, size] : nb::cast<nb::dict>(shape)) {
      if (!nb::isinstance<nb::str>(name)) {
        throw InvalidArgument("shape's keys are axis names (str), not " + repr_text(name));
      }
      names.push_back(text_from(name, "a key of shape"));
      sizes.push_back(int_from(size, "shape['" + names.back() + "']"));
    }
  } else {
    if (axis_names.is_none()) {
      throw InvalidArgument(
          "axis_names is missing: give Mesh((2, 4), ('data', 'model')) or "
          "Mesh({'data': 2, 'model': 4})");
    }
    sizes = ints_from(shape, "shape");
    names = names_from(axis_names, "axis_names");
    if (names.size() != sizes.size()) {
      throw InvalidArgument("shape has " + std::to_string(sizes.size()) + " sizes but axis_names " +
                            std::to_string(names.size()) + " names");
    }
  }
  std::optional<std::vector<DeviceId>> ids;
  if (!devices.is_none()) ids = ints_from(devices, "devices");
  return Mesh(std::move(names), std::move(sizes), std::move(ids));
}

PartitionSpec make_spec(const nb::args& entries) {
  std::vector<SpecEntry> parsed;
  for (std::size_t d = 0; d < entries.size(); ++d) {
    parsed.push_back(spec_entry_from(entries[d], "PartitionSpec entry " + std::to_string(d)));
  }
  return PartitionSpec(std::move(parsed));
}

// Equal to shardwise's PartitionSpec of the same entries, and to JAX's: the strategies answer
// with JAX's where JAX is installed, and a spec compared with one must not depend on which.
bool spec_equals(const PartitionSpec& spec, nb::handle other) {
  if (nb::isinstance<PartitionSpec>(other)) return spec == nb::cast<PartitionSpec>(other);
  if (!is_jax_spec(other)) return false;
  try {
    return spec == spec_from(other, "other");
  } catch (const Error&) {  // UNCONSTRAINED entries, unreduced axes: no spec of ours
    return false;
  }
}

Evenness evenness_of(bool uneven) { return uneven ? Evenness::kUneven : Evenness::kStrict; }

void bind_mesh(nb::module_& m) {
  nb::class_<Mesh>(m, "Mesh",
                   "Named mesh axes with sizes and a device id per position, row-major (the last "
                   "axis varies fastest), as jax.sharding.Mesh.")
      .def(
          "__init__",
          [](Mesh* self, nb::handle shape, nb::handle axis_names, nb::handle devices) {
            new (self) Mesh(make_mesh(shape, axis_names, devices));
          },
          nb::arg("shape"), nb::arg("axis_names") = nb::none(), nb::arg("devices") = nb::none())
      .def_static(
          "parse", [](nb::str text) { return Mesh::parse(text_from(text, "text")); },
          nb::arg("text"), "Mesh.parse('data=2,model=4'), or the printed form.")
      .def_prop_ro("axis_names", [](const Mesh& mesh) { return to_tuple(mesh.axis_names()); })
      .def_prop_ro("axis_sizes", [](const Mesh& mesh) { return to_tuple(mesh.axis_sizes()); })
      .def_prop_ro(
          "shape",
          [](const Mesh& mesh) {
            nb::dict shape;
            for (std::size_t i = 0; i < mesh.num_axes(); ++i) {
              shape[mesh.axis_names()[i].c_str()] = mesh.axis_sizes()[i];
            }
            return shape;
          },
          "{axis name: size}, in mesh order (jax.sharding.Mesh.shape).")
      .def_prop_ro(
          "devices", [](const Mesh& mesh) { return to_tuple(mesh.device_ids()); },
          "The device ids in mesh order.")
      .def_prop_ro("size", &Mesh::size)
      .def(
          "axis_size",
          [](const Mesh& mesh, nb::str name) { return mesh.axis_size(text_from(name, "name")); },
          nb::arg("name"))
      .def(
          "coords_of",
          [](const Mesh& mesh, nb::handle device) {
            return mesh.coords_of(int_from(device, "device"));
          },
          nb::arg("device"))
      .def(
          "device_at",
          [](const Mesh& mesh, nb::handle coords) {
            return mesh.device_at(ints_from(coords, "coords"));
          },
          nb::arg("coords"))
      .def(
          "groups",
          [](const Mesh& mesh, nb::handle axes) {
            return mesh.groups(nb::isinstance<nb::str>(axes)
                                   ? std::vector<std::string>{text_from(axes, "axes")}
                                   : names_from(axes, "axes"));
          },
          nb::arg("axes"),
          "For each setting of the other axes, the devices that differ only along `axes`: the "
          "groups a collective over `axes` runs in.")
      .def("__repr__", &Mesh::to_string)
      .def("__hash__", [](const Mesh& mesh) { return std::hash<Mesh>{}(mesh); })
      .def(nb::self == nb::self)
      .def(nb::self != nb::self);
}

void bind_spec(nb::module_& m) {
  nb::class_<PartitionSpec>(
      m, "PartitionSpec",
      "Per array dimension: None (replicated), a mesh axis, or a tuple of axes (major to "
      "minor), canonical as jax.sharding.PartitionSpec.")
      .def("__init__",
           [](PartitionSpec* self, const nb::args& entries) {
             new (self) PartitionSpec(make_spec(entries));
           })
      .def_static(
          "parse", [](nb::str text) { return PartitionSpec::parse(text_from(text, "text")); },
          nb::arg("text"), "PartitionSpec.parse(\"P('data', None)\").")
      .def("__len__", &PartitionSpec::size)
      .def("__getitem__",
           [](const PartitionSpec& spec, nb::handle index) {
             std::int64_t d = int_from(index, "index");
             const auto size = static_cast<std::int64_t>(spec.size());
             if (d < 0) d += size;
             if (d < 0 || d >= size) throw nb::index_error("PartitionSpec index out of range");
             return entry_to_python(spec.entries()[static_cast<std::size_t>(d)]);
           })
      .def("__iter__",
           [](const PartitionSpec& spec) {
             nb::list entries;
             for (const SpecEntry& entry : spec.entries()) entries.append(entry_to_python(entry));
             return nb::iter(entries);
           })
      .def("all_axes", &PartitionSpec::all_axes)
      .def("__repr__", &PartitionSpec::to_string)
      .def("__hash__", [](const PartitionSpec& spec) { return std::hash<PartitionSpec>{}(spec); })
      .def("__eq__", &spec_equals)
      .def("__ne__",
           [](const PartitionSpec& spec, nb::handle other) { return !spec_equals(spec, other); });
  m.attr("P") = m.attr("PartitionSpec");
  // For the package's Python (to_dtensor_placements, from_jax): the one conversion of a spec
  // the bindings use, naming `field` in its errors.
  m.def(
      "_spec_from",
      [](nb::handle value, nb::str field) { return spec_from(value, text_from(field, "field")); },
      nb::arg("value"), nb::arg("field"));
}

void bind_named_sharding(nb::module_& m) {
  nb::class_<DeviceShard>(m, "DeviceShard", "One device's part of an array.")
      .def_ro("device", &DeviceShard::device)
      .def_ro("replica_id", &DeviceShard::replica_id)
      .def_prop_ro(
          "index", [](const DeviceShard& shard) { return index_to_ranges(shard.index); },
          "((start, stop), ...) per dimension.")
      .def("__repr__", [](const DeviceShard& shard) {
        return "DeviceShard(device=" + std::to_string(shard.device) +
               ", index=" + to_string(shard.index) +
               ", replica_id=" + std::to_string(shard.replica_id) + ")";
      });

  nb::class_<NamedSharding>(m, "NamedSharding",
                            "A mesh and a spec: which part of an array each device holds, as "
                            "jax.sharding.NamedSharding. uneven=True allows dimensions the shards "
                            "do not divide (torch.chunk's blocks, as DTensor).")
      .def(
          "__init__",
          [](NamedSharding* self, const Mesh& mesh, nb::handle spec, bool uneven) {
            new (self) NamedSharding(mesh, spec_from(spec, "spec"), evenness_of(uneven));
          },
          nb::arg("mesh"), nb::arg("spec"), nb::kw_only(), nb::arg("uneven") = false)
      .def_prop_ro("mesh", &NamedSharding::mesh)
      .def_prop_ro("spec", &NamedSharding::spec)
      .def_prop_ro("uneven",
                   [](const NamedSharding& s) { return s.evenness() == Evenness::kUneven; })
      .def(
          "validate",
          [](const NamedSharding& s, nb::handle shape) { s.validate(shape_from(shape, "shape")); },
          nb::arg("shape"))
      .def(
          "shard_shape",
          [](const NamedSharding& s, nb::handle shape) {
            return to_tuple(s.shard_shape(shape_from(shape, "shape")));
          },
          nb::arg("shape"))
      .def(
          "devices_indices_map",
          [](const NamedSharding& s, nb::handle shape_arg) {
            const Shape shape = shape_from(shape_arg, "shape");
            const std::vector<std::int64_t> shards = s.num_shards(shape.size());
            nb::dict map;
            for (const DeviceShard& shard : s.devices_indices_map(shape)) {
              map[nb::int_(shard.device)] = index_to_slices(shard.index, shards);
            }
            return map;
          },
          nb::arg("shape"),
          "{device id: tuple of slices}, as JAX gives it (slice(None) where a dimension is not "
          "split).")
      .def(
          "shards",
          [](const NamedSharding& s, nb::handle shape) {
            return s.devices_indices_map(shape_from(shape, "shape"));
          },
          nb::arg("shape"), "Every device's DeviceShard, in mesh order.")
      .def(
          "num_shards",
          [](const NamedSharding& s, nb::handle ndim) {
            return s.num_shards(static_cast<std::size_t>(
                bounded_int(ndim, "ndim", 0, static_cast<std::int64_t>(kMaxRank))));
          },
          nb::arg("ndim"))
      .def_prop_ro("num_replicas", &NamedSharding::num_replicas)
      .def_prop_ro("is_fully_replicated", &NamedSharding::is_fully_replicated)
      .def(
          "replica_id",
          [](const NamedSharding& s, nb::handle shape, nb::handle device) {
            return s.replica_id(shape_from(shape, "shape"), int_from(device, "device"));
          },
          nb::arg("shape"), nb::arg("device"))
      .def(
          "is_equivalent_to",
          [](const NamedSharding& s, const NamedSharding& other, nb::handle ndim) {
            return s.is_equivalent_to(
                other, static_cast<std::size_t>(
                           bounded_int(ndim, "ndim", 0, static_cast<std::int64_t>(kMaxRank))));
          },
          nb::arg("other"), nb::arg("ndim"))
      .def("__repr__", &NamedSharding::to_string)
      .def("__hash__", [](const NamedSharding& s) { return std::hash<NamedSharding>{}(s); })
      .def(nb::self == nb::self)
      .def(nb::self != nb::self);
}

void bind_placements(nb::module_& m) {
  nb::class_<Replicate>(m, "Replicate", "Every device of the mesh axis holds the whole.")
      .def(nb::init<>())
      .def("__repr__", [](const Replicate& p) { return to_string(Placement(p)); })
      .def("__hash__",
           [](const Replicate& p) { return std::hash<std::string>{}(to_string(Placement(p))); })
      .def(nb::self == nb::self);
  nb::class_<Shard>(m, "Shard",
                    "The mesh axis splits dimension `dim`; `position` orders several axes "
                    "splitting one dimension (-1: by mesh axis order, as DTensor).")
      .def(
          "__init__",
          [](Shard* self, nb::handle dim, nb::handle position) {
            const auto rank = static_cast<std::int64_t>(kMaxRank);
            const auto axes = static_cast<std::int64_t>(Mesh::kMaxAxes);
            new (self) Shard{static_cast<int>(bounded_int(dim, "dim", -rank, rank - 1)),
                             static_cast<int>(bounded_int(position, "position", -1, axes - 1))};
          },
          nb::arg("dim"), nb::arg("position") = -1)
      .def_ro("dim", &Shard::dim)
      .def_ro("position", &Shard::position)
      .def("__repr__", [](const Shard& p) { return to_string(Placement(p)); })
      .def("__hash__",
           [](const Shard& p) { return std::hash<std::string>{}(to_string(Placement(p))); })
      .def(nb::self == nb::self);
  nb::class_<Partial>(m, "Partial", "A pending reduction over the mesh axis: sum, avg, max, min.")
      .def(
          "__init__",
          [](Partial* self, nb::str op) {
            new (self) Partial{parse_reduce_op(text_from(op, "op"))};
          },
          nb::arg("op") = "sum")
      .def_prop_ro("op", [](const Partial& p) { return to_string(p.op); })
      .def("__repr__", [](const Partial& p) { return to_string(Placement(p)); })
      .def("__hash__",
           [](const Partial& p) { return std::hash<std::string>{}(to_string(Placement(p))); })
      .def(nb::self == nb::self);
  m.def(
      "to_placements",
      [](const Mesh& mesh, nb::handle spec) {
        return to_placements(mesh, spec_from(spec, "spec"));
      },
      nb::arg("mesh"), nb::arg("spec"), "One placement per mesh axis.");
  m.def(
      "to_partition_spec",
      [](const Mesh& mesh, const Placements& placements, nb::handle ndim) {
        const auto rank = optional_int(ndim, "ndim", 0, static_cast<std::int64_t>(kMaxRank));
        return to_partition_spec(
            mesh, placements,
            rank ? std::optional<std::size_t>(static_cast<std::size_t>(*rank)) : std::nullopt);
      },
      nb::arg("mesh"), nb::arg("placements"), nb::arg("ndim") = nb::none(),
      "The spec the placements describe.");
}

}  // namespace

void bind_core(nb::module_& m) {
  bind_mesh(m);
  bind_spec(m);
  bind_named_sharding(m);
  bind_placements(m);
}

}  // namespace shardwise::python
