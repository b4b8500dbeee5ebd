#pragma once
// Python values to shardwise's value types and back, for the bindings. Every conversion of a
// caller's value names the argument it came from in its error (shardwise.InvalidArgument, a
// ValueError), as the C++ library's own errors do: a shape of -1, 2**63, a float or a bool
// where a size belongs, a spec entry that is neither None, a name nor a tuple of names.

#include <nanobind/nanobind.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/named_sharding.hpp"
#include "shardwise/core/partition_spec.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/strategy/logical_axes.hpp"

namespace shardwise::python {

namespace nb = nanobind;

// A caller's str as UTF-8: every str a binding takes comes through here (never nb::cast, whose
// failure is a std::bad_cast). A str that is not valid text (a lone surrogate, "\ud800") is
// refused naming `field`; anything else than a str too.
std::string text_from(nb::handle value, const std::string& field);
// None, or text_from's str.
std::optional<std::string> optional_text(nb::handle value, const std::string& field);
// repr(value) as UTF-8, whatever the object's __repr__ returns (a lone surrogate escaped),
// shortened for a message.
std::string repr_text(nb::handle value);

// A Python int that fits std::int64_t (not a bool, not a float).
std::int64_t int_from(nb::handle value, const std::string& field);
// A sequence of ints, or an object with a `.shape` (a NumPy, JAX or PyTorch array).
Shape shape_from(nb::handle value, const std::string& field);
// A sequence of logical names; None or "" leaves a dimension unnamed.
LogicalAxes axes_from(nb::handle value, const std::string& field);
// A sequence of strings.
std::vector<std::string> names_from(nb::handle value, const std::string& field);
// A sequence of ints.
std::vector<std::int64_t> ints_from(nb::handle value, const std::string& field);
// int_from within [least, most].
std::int64_t bounded_int(nb::handle value, const std::string& field, std::int64_t least,
                         std::int64_t most);
// None, or an int within [least, most].
std::optional<std::int64_t> optional_int(nb::handle value, const std::string& field,
                                         std::int64_t least, std::int64_t most);
// A mesh axis index: None, or 0 to Mesh::kMaxAxes - 1.
std::optional<int> mesh_axis_from(nb::handle value);
// A real number (a Python or NumPy int or float, not a bool); NaN and infinities pass through
// for the caller's range check to refuse.
double number_from(nb::handle value, const std::string& field);

// Whether `value` is a jax.sharding.PartitionSpec (never imports JAX: no JAX imported, no JAX
// spec).
bool is_jax_spec(nb::handle value);
// A spec the strategies answer with: jax.sharding.PartitionSpec where JAX is importable (JAX is
// imported on the first call), shardwise's PartitionSpec where it is not.
nb::object spec_to_python(const PartitionSpec& spec);

// None, a mesh axis name, or a tuple or list of names (major to minor).
SpecEntry spec_entry_from(nb::handle value, const std::string& field);
// A PartitionSpec, a jax.sharding.PartitionSpec, a sequence of entries, or the text
// "P('data', None)".
PartitionSpec spec_from(nb::handle value, const std::string& field);
// None, 'x' or ('x', 'y'), as JAX's PartitionSpec holds an entry.
nb::object entry_to_python(const SpecEntry& entry);
// A shard index as JAX's devices_indices_map gives it: a tuple of slices, slice(None) for a
// dimension that is not split.
nb::tuple index_to_slices(const ShardIndex& index, const std::vector<std::int64_t>& shards);
// A shard index as ((start, stop), ...).
nb::tuple index_to_ranges(const ShardIndex& index);

}  // namespace shardwise::python
