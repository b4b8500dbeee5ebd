#include "conversions.hpp"

#include <nanobind/stl/string.h>

#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"

namespace shardwise::python {
namespace {

std::string repr_of(nb::handle value) {
  const nb::str text = nb::repr(value);
  return echo_input(text.c_str(), 60);
}

[[noreturn]] void refuse(const std::string& field, nb::handle value, const std::string& expected) {
  throw InvalidArgument(field + " is " + repr_of(value) + "; expected " + expected);
}

bool is_sequence(nb::handle value) {
  return nb::isinstance<nb::tuple>(value) || nb::isinstance<nb::list>(value);
}

}  // namespace

std::int64_t int_from(nb::handle value, const std::string& field) {
  // bool is an int in Python; a size of True is a mistake, not 1.
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    // NumPy's integer scalars are not ints but index as one.
    if (!PyBool_Check(value.ptr()) && PyIndex_Check(value.ptr()) && !PyFloat_Check(value.ptr())) {
      const nb::object index = nb::steal(PyNumber_Index(value.ptr()));
      if (index.is_valid()) return int_from(index, field);
      PyErr_Clear();
    }
    refuse(field, value, "an integer");
  }
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) refuse(field, value, "an integer between -2**63 and 2**63 - 1");
  if (result == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    refuse(field, value, "an integer");
  }
  return static_cast<std::int64_t>(result);
}

std::vector<std::int64_t> ints_from(nb::handle value, const std::string& field) {
  if (!is_sequence(value)) refuse(field, value, "a tuple or list of integers");
  std::vector<std::int64_t> ints;
  std::size_t i = 0;
  for (nb::handle item : value) {
    ints.push_back(int_from(item, field + "[" + std::to_string(i++) + "]"));
  }
  return ints;
}

std::int64_t bounded_int(nb::handle value, const std::string& field, std::int64_t least,
                         std::int64_t most) {
  const std::int64_t result = int_from(value, field);
  if (result < least || result > most) {
    throw InvalidArgument(field + " is " + std::to_string(result) + "; expected " +
                          std::to_string(least) + " to " + std::to_string(most));
  }
  return result;
}

std::optional<std::int64_t> optional_int(nb::handle value, const std::string& field,
                                         std::int64_t least, std::int64_t most) {
  if (value.is_none()) return std::nullopt;
  return bounded_int(value, field, least, most);
}

std::optional<int> mesh_axis_from(nb::handle value) {
  const auto axis =
      optional_int(value, "mesh_axis", 0, static_cast<std::int64_t>(Mesh::kMaxAxes) - 1);
  if (!axis) return std::nullopt;
  return static_cast<int>(*axis);
}

double number_from(nb::handle value, const std::string& field) {
  if (PyBool_Check(value.ptr()) || !PyNumber_Check(value.ptr()) || PyComplex_Check(value.ptr())) {
    refuse(field, value, "a number");
  }
  const double result = PyFloat_AsDouble(value.ptr());
  if (result == -1.0 && PyErr_Occurred()) {  // an int past a double's range, or no __float__
    PyErr_Clear();
    refuse(field, value, "a number a double holds");
  }
  return result;
}

Shape shape_from(nb::handle value, const std::string& field) {
  if (!is_sequence(value) && nb::hasattr(value, "shape")) {
    const nb::object shape = value.attr("shape");
    // torch.Size is a tuple; JAX's and NumPy's shapes are tuples.
    if (!is_sequence(shape)) refuse(field + ".shape", shape, "a tuple of sizes");
    return shape_from(shape, field + ".shape");
  }
  if (!is_sequence(value)) refuse(field, value, "a shape: a tuple of sizes, or an array");
  if (nb::len(value) > kMaxRank) {
    refuse(field, value, "at most " + std::to_string(kMaxRank) + " dimensions");
  }
  Shape shape = ints_from(value, field);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw InvalidArgument(field + "[" + std::to_string(d) + "] is " + std::to_string(shape[d]) +
                            "; a size is 0 or more");
    }
  }
  (void)num_elements(shape);  // refuses a shape whose elements do not fit 64 bits
  return shape;
}

std::vector<std::string> names_from(nb::handle value, const std::string& field) {
  if (nb::isinstance<nb::str>(value) || !is_sequence(value)) {
    refuse(field, value, "a tuple or list of names");
  }
  std::vector<std::string> names;
  std::size_t i = 0;
  for (nb::handle item : value) {
    if (!nb::isinstance<nb::str>(item)) {
      refuse(field + "[" + std::to_string(i) + "]", item, "a name (str)");
    }
    names.push_back(nb::cast<std::string>(item));
    ++i;
  }
  return names;
}

LogicalAxes axes_from(nb::handle value, const std::string& field) {
  if (nb::isinstance<nb::str>(value) || !is_sequence(value)) {
    refuse(field, value, "a tuple or list of logical names (str or None)");
  }
  LogicalAxes axes;
  std::size_t i = 0;
  for (nb::handle item : value) {
    if (item.is_none()) {
      axes.emplace_back();
    } else if (nb::isinstance<nb::str>(item)) {
      axes.push_back(nb::cast<std::string>(item));
    } else {
      refuse(field + "[" + std::to_string(i) + "]", item, "a logical name (str) or None");
    }
    ++i;
  }
  return axes;
}

SpecEntry spec_entry_from(nb::handle value, const std::string& field) {
  if (value.is_none()) return None;
  if (nb::isinstance<nb::str>(value)) return SpecEntry(nb::cast<std::string>(value));
  if (is_sequence(value)) {
    std::vector<std::string> axes;
    std::size_t i = 0;
    for (nb::handle item : value) {
      if (!nb::isinstance<nb::str>(item)) {
        refuse(field + "[" + std::to_string(i) + "]", item,
               "a mesh axis name (str); tuples do not nest");
      }
      axes.push_back(nb::cast<std::string>(item));
      ++i;
    }
    // As JAX: () is None, ('x',) is 'x'.
    return SpecEntry(std::move(axes));
  }
  refuse(field, value, "None, a mesh axis name, or a tuple of names");
}

PartitionSpec spec_from(nb::handle value, const std::string& field) {
  if (nb::isinstance<PartitionSpec>(value)) return nb::cast<PartitionSpec>(value);
  if (nb::isinstance<nb::str>(value)) return PartitionSpec::parse(nb::cast<std::string>(value));
  // A tuple or list of entries, or JAX's PartitionSpec (a tuple of entries too); not any
  // iterable: a set has no order, a generator may not end.
  const std::string type_name = nb::cast<std::string>(value.type().attr("__name__"));
  if (!is_sequence(value) && type_name != "PartitionSpec") {
    refuse(field, value, "a PartitionSpec, a tuple of entries or a spec's text");
  }
  if (nb::len(value) > kMaxRank) {
    refuse(field, value, "at most " + std::to_string(kMaxRank) + " entries");
  }
  std::vector<SpecEntry> entries;
  std::size_t d = 0;
  for (nb::handle item : value) {
    entries.push_back(spec_entry_from(item, field + "[" + std::to_string(d++) + "]"));
  }
  return PartitionSpec(std::move(entries));
}

nb::object entry_to_python(const SpecEntry& entry) {
  const auto& axes = entry.axes();
  if (axes.empty()) return nb::none();
  if (axes.size() == 1) return nb::str(axes.front().c_str());
  nb::list names;
  for (const std::string& axis : axes) names.append(nb::str(axis.c_str()));
  return nb::tuple(names);
}

nb::tuple index_to_slices(const ShardIndex& index, const std::vector<std::int64_t>& shards) {
  nb::list slices;
  for (std::size_t d = 0; d < index.size(); ++d) {
    const bool split = d < shards.size() && shards[d] > 1;
    if (split) {
      slices.append(nb::slice(nb::int_(index[d].start), nb::int_(index[d].stop), nb::none()));
    } else {
      slices.append(nb::slice(nb::none(), nb::none(), nb::none()));
    }
  }
  return nb::tuple(slices);
}

nb::tuple index_to_ranges(const ShardIndex& index) {
  nb::list ranges;
  for (const IndexRange& range : index) {
    ranges.append(nb::make_tuple(range.start, range.stop));
  }
  return nb::tuple(ranges);
}

}  // namespace shardwise::python
