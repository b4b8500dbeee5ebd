#include "conversions.hpp"

#include <nanobind/stl/string.h>

#include <cstdio>

#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"

namespace shardwise::python {
namespace {

// jax.sharding.PartitionSpec once looked up (a reference held for the interpreter's life, as the
// type must outlive every spec made of it), and whether it has been: JAX is imported once.
PyObject* jax_spec_type = nullptr;
bool jax_looked_up = false;

[[noreturn]] void refuse(const std::string& field, nb::handle value, const std::string& expected) {
  throw InvalidArgument(field + " is " + repr_text(value) + "; expected " + expected);
}

bool is_sequence(nb::handle value) {
  return nb::isinstance<nb::tuple>(value) || nb::isinstance<nb::list>(value);
}

// The name of value's type is `name`.
bool type_named(nb::handle value, const char* name) {
  const nb::object type_name = nb::getattr(value.type(), "__name__", nb::none());
  return nb::isinstance<nb::str>(type_name) &&
         PyUnicode_CompareWithASCIIString(type_name.ptr(), name) == 0;
}

}  // namespace

std::string repr_text(nb::handle value) {
  const nb::str text = nb::repr(value);
  // A __repr__ may return any str, lone surrogates included: escape what UTF-8 cannot hold.
  const nb::object bytes =
      nb::steal(PyUnicode_AsEncodedString(text.ptr(), "utf-8", "backslashreplace"));
  if (!bytes.is_valid()) throw nb::python_error();
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(bytes.ptr(), &data, &size) != 0) throw nb::python_error();
  return echo_input(std::string_view(data, static_cast<std::size_t>(size)), 60);
}

std::string text_from(nb::handle value, const std::string& field) {
  if (!nb::isinstance<nb::str>(value)) refuse(field, value, "a str");
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (data != nullptr) return std::string(data, static_cast<std::size_t>(size));
  if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) throw nb::python_error();
  PyErr_Clear();
  // UTF-8 encodes every code point but the surrogates, U+D800 to U+DFFF, which a str holds
  // only alone ("\ud800", or os.fsdecode's escapes of bytes that are not UTF-8).
  const Py_ssize_t length = PyUnicode_GetLength(value.ptr());
  Py_ssize_t at = 0;
  Py_UCS4 code = 0;
  for (; at < length; ++at) {
    code = PyUnicode_ReadChar(value.ptr(), at);
    if (code >= 0xD800 && code <= 0xDFFF) break;
  }
  if (at == length) {  // not a surrogate after all: say what Python said
    throw InvalidArgument(field + " is " + repr_text(value) +
                          ", which is not valid text: UTF-8 cannot encode it");
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(code));
  throw InvalidArgument(field + " is " + repr_text(value) +
                        ", which is not valid text: a lone surrogate (U+" + hex + ") at index " +
                        std::to_string(at) + "; expected a str that UTF-8 encodes");
}

std::optional<std::string> optional_text(nb::handle value, const std::string& field) {
  if (value.is_none()) return std::nullopt;
  return text_from(value, field);
}

bool is_jax_spec(nb::handle value) {
  // No JAX imported, no JAX spec: never import JAX to answer.
  const nb::object modules = nb::module_::import_("sys").attr("modules");
  const nb::object sharding = modules.attr("get")("jax.sharding");
  if (sharding.is_none()) return false;
  const nb::object type = nb::getattr(sharding, "PartitionSpec", nb::none());
  if (!PyType_Check(type.ptr())) return false;
  const int result = PyObject_IsInstance(value.ptr(), type.ptr());
  if (result < 0) throw nb::python_error();
  return result == 1;
}

nb::object spec_to_python(const PartitionSpec& spec) {
  if (!jax_looked_up) {
    try {
      nb::object type = nb::module_::import_("jax.sharding").attr("PartitionSpec");
      jax_spec_type = type.release().ptr();
    } catch (nb::python_error& e) {
      // Not installed: shardwise's own spec. Any other failure (a broken JAX) is the caller's
      // to see, and the next call tries again.
      if (!e.matches(PyExc_ImportError)) throw;
    }
    jax_looked_up = true;
  }
  if (jax_spec_type == nullptr) return nb::cast(PartitionSpec(spec));
  nb::list entries;
  for (const SpecEntry& entry : spec.entries()) entries.append(entry_to_python(entry));
  const nb::tuple arguments(entries);
  const nb::object result = nb::steal(PyObject_CallObject(jax_spec_type, arguments.ptr()));
  if (!result.is_valid()) throw nb::python_error();
  return result;
}

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
    names.push_back(text_from(item, field + "[" + std::to_string(i) + "]"));
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
      axes.push_back(text_from(item, field + "[" + std::to_string(i) + "]"));
    } else {
      refuse(field + "[" + std::to_string(i) + "]", item, "a logical name (str) or None");
    }
    ++i;
  }
  return axes;
}

SpecEntry spec_entry_from(nb::handle value, const std::string& field) {
  if (value.is_none()) return None;
  if (nb::isinstance<nb::str>(value)) return SpecEntry(text_from(value, field));
  if (is_sequence(value)) {
    std::vector<std::string> axes;
    std::size_t i = 0;
    for (nb::handle item : value) {
      if (!nb::isinstance<nb::str>(item)) {
        refuse(field + "[" + std::to_string(i) + "]", item,
               "a mesh axis name (str); tuples do not nest");
      }
      axes.push_back(text_from(item, field + "[" + std::to_string(i) + "]"));
      ++i;
    }
    // As JAX: () is None, ('x',) is 'x'.
    return SpecEntry(std::move(axes));
  }
  refuse(field, value, "None, a mesh axis name, or a tuple of names");
}

PartitionSpec spec_from(nb::handle value, const std::string& field) {
  if (nb::isinstance<PartitionSpec>(value)) return nb::cast<PartitionSpec>(value);
  if (nb::isinstance<nb::str>(value)) return PartitionSpec::parse(text_from(value, field));
  // A tuple or list of entries, or JAX's PartitionSpec (its class is P since JAX 0.6, a tuple of
  // entries before); not any iterable: a set has no order, a generator may not end.
  const bool jax = is_jax_spec(value) || type_named(value, "PartitionSpec");
  if (!is_sequence(value) && !jax) {
    refuse(field, value, "a PartitionSpec, a tuple of entries or a spec's text");
  }
  if (jax) {
    for (const char* extra : {"unreduced", "reduced"}) {
      const nb::object axes = nb::getattr(value, extra, nb::none());
      if (!axes.is_none() && PyObject_IsTrue(axes.ptr()) == 1) {
        refuse(field, value,
               std::string("a spec without ") + extra + " axes (shardwise's have none)");
      }
    }
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
