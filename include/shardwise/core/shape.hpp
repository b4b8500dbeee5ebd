#pragma once
// Array shapes and the half-open index ranges that describe a shard's place in an array.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {

// Sizes of an array's dimensions, outermost first. A scalar has an empty shape.
using Shape = std::vector<std::int64_t>;

// The most dimensions an array has here (NumPy 2's limit): a rank past it is a mistake or
// hostile input, refused before memory is spent on it.
inline constexpr std::size_t kMaxRank = 64;

// Number of elements of `shape` (1 for a scalar). Throws InvalidArgument when the count does
// not fit in 64 bits.
std::int64_t num_elements(const Shape& shape);

// "(8, 16)"; "()" for a scalar.
std::string to_string(const Shape& shape);

// Parses a comma-separated list of integers such as "8, 16" (optionally in parentheses or
// brackets; empty text is the empty list). `what` names the list in error messages; a number
// beyond 64 bits is an error quoting it.
std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what);

// Parses "8,16" (spaces allowed, optional surrounding parentheses or brackets). An empty
// string or "()" is the scalar shape. Sizes must be integers >= 0 whose product fits in 64
// bits.
Shape parse_shape(std::string_view text);

// The half-open range [start, stop) along one dimension.
struct IndexRange {
  std::int64_t start = 0;
  std::int64_t stop = 0;

  [[nodiscard]] std::int64_t size() const { return stop - start; }
  [[nodiscard]] bool empty() const { return stop <= start; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

// A shard's place in the global array: one range per dimension (JAX's tuple of slices).
using ShardIndex = std::vector<IndexRange>;

// "[0:4, 0:16]" (numpy slice notation).
std::string to_string(const ShardIndex& index);

// Shape of the block an index selects.
Shape shape_of(const ShardIndex& index);

// The intersection of two indices of the same rank; empty ranges where they do not meet.
ShardIndex intersect(const ShardIndex& a, const ShardIndex& b);

// True when any dimension of the index is empty (it selects no element).
bool is_empty(const ShardIndex& index);

// The elements an index selects (a range of negative size selects none); InvalidArgument
// where the count overflows int64.
std::uint64_t elements_of(const ShardIndex& index);

}  // namespace shardwise
