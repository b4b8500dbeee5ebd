#pragma once
// PartitionSpec: per array dimension, the mesh axes that split it. An entry is replicated
// (None), one axis, or a tuple of axes ordered major to minor. Entries are kept canonical as
// JAX keeps them: () is None and ('x',) is 'x'. Dimensions past the last entry are replicated.

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {

// The mesh axes of one dimension, major to minor. Empty means replicated (None).
class SpecEntry {
 public:
  SpecEntry() = default;                                   // None
  SpecEntry(const char* axis) : axes_{axis} {}             // NOLINT: 'x' reads as in Python
  SpecEntry(std::string axis) : axes_{std::move(axis)} {}  // NOLINT
  SpecEntry(std::initializer_list<std::string> axes) : axes_(axes) {}
  explicit SpecEntry(std::vector<std::string> axes) : axes_(std::move(axes)) {}

  [[nodiscard]] const std::vector<std::string>& axes() const { return axes_; }
  [[nodiscard]] bool is_replicated() const { return axes_.empty(); }
  // "None", "'x'" or "('x', 'y')".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const SpecEntry&, const SpecEntry&) = default;

 private:
  std::vector<std::string> axes_;
};

// The value that reads as Python's None in a spec literal: P("data", None).
inline const SpecEntry None{};

class PartitionSpec {
 public:
  PartitionSpec() = default;
  PartitionSpec(std::initializer_list<SpecEntry> entries) : entries_(entries) {}
  explicit PartitionSpec(std::vector<SpecEntry> entries) : entries_(std::move(entries)) {}

  // Parses "P('data', None, ('fsdp', 'model'))", "PartitionSpec(...)" or the bare entries
  // "'data', None". Names may use either quote or none. Nested tuples are an error.
  static PartitionSpec parse(std::string_view text);

  [[nodiscard]] const std::vector<SpecEntry>& entries() const { return entries_; }
  [[nodiscard]] std::size_t size() const { return entries_.size(); }
  // The entry for dimension d; None past the end.
  [[nodiscard]] const SpecEntry& entry(std::size_t d) const;
  // Every axis named, in order of appearance.
  [[nodiscard]] std::vector<std::string> all_axes() const;
  // The dimension that `axis` splits, or -1.
  [[nodiscard]] int dimension_of(std::string_view axis) const;

  // "P('data', None, ('fsdp', 'model'))".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const PartitionSpec&, const PartitionSpec&) = default;

 private:
  std::vector<SpecEntry> entries_;
};

// Shorthand in the style of `from jax.sharding import PartitionSpec as P`.
using P = PartitionSpec;

inline std::ostream& operator<<(std::ostream& out, const PartitionSpec& value) {
  return out << value.to_string();
}

}  // namespace shardwise

template <>
struct std::hash<shardwise::PartitionSpec> {
  std::size_t operator()(const shardwise::PartitionSpec& spec) const noexcept;
};
