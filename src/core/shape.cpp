#include "shardwise/core/shape.hpp"

#include <algorithm>
#include <sstream>

#include "detail/check.hpp"
#include "detail/text_scanner.hpp"
#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

std::int64_t num_elements(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t size : shape) {
    if (__builtin_mul_overflow(count, size, &count)) {
      throw InvalidArgument("shape " + to_string(shape) +
                            " has more elements than a 64-bit integer counts");
    }
  }
  return count;
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << '(';
  for (std::size_t d = 0; d < shape.size(); ++d) out << (d ? ", " : "") << shape[d];
  if (shape.size() == 1) out << ',';
  out << ')';
  return out.str();
}

std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view what) {
  detail::TextScanner scan(text, what);
  scan.skip_space();
  char close = '\0';
  if (scan.consume('(')) {
    close = ')';
  } else if (scan.consume('[')) {
    close = ']';
  }
  std::vector<std::int64_t> values;
  scan.skip_space();
  while (!scan.at_end() && scan.peek() != close) {
    values.push_back(scan.integer("an integer"));
    scan.skip_space();
    if (!scan.consume(',')) break;
    scan.skip_space();
  }
  if (close != '\0') scan.expect(close);
  scan.expect_end();
  return values;
}

Shape parse_shape(std::string_view text) {
  Shape shape = parse_int_list(text, "shape");
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      throw ParseError("shape '" + echo_input(text) + "': dimension " + std::to_string(d) +
                       " has size " + std::to_string(shape[d]) + ", expected a size >= 0");
    }
  }
  (void)num_elements(shape);  // a shape whose element count overflows is refused here
  return shape;
}

std::string to_string(const ShardIndex& index) {
  std::ostringstream out;
  out << '[';
  for (std::size_t d = 0; d < index.size(); ++d) {
    out << (d ? ", " : "") << index[d].start << ':' << index[d].stop;
  }
  out << ']';
  return out.str();
}

Shape shape_of(const ShardIndex& index) {
  Shape shape;
  shape.reserve(index.size());
  for (const IndexRange& range : index) shape.push_back(std::max<std::int64_t>(0, range.size()));
  return shape;
}

ShardIndex intersect(const ShardIndex& a, const ShardIndex& b) {
  SHARDWISE_CHECK(a.size() == b.size());
  ShardIndex out(a.size());
  for (std::size_t d = 0; d < a.size(); ++d) {
    out[d].start = std::max(a[d].start, b[d].start);
    out[d].stop = std::max(out[d].start, std::min(a[d].stop, b[d].stop));
  }
  return out;
}

bool is_empty(const ShardIndex& index) {
  return std::any_of(index.begin(), index.end(), [](const IndexRange& r) { return r.empty(); });
}

std::uint64_t elements_of(const ShardIndex& index) {
  std::int64_t n = 1;
  for (const IndexRange& range : index) {
    n = checked_multiply(n, std::max<std::int64_t>(0, range.size()), "the elements of an index");
  }
  return static_cast<std::uint64_t>(n);
}

}  // namespace shardwise
