// Shapes, integer lists, dtypes and reduce ops from text.
#include "fuzz_input.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/placement.hpp"
#include "shardwise/core/shape.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::expect_only_errors([&] {
    const Shape shape = parse_shape(text);
    fuzz::require(num_elements(shape) >= 0);
    fuzz::require(parse_shape(to_string(shape)) == shape);
  });
  fuzz::expect_only_errors([&] { (void)parse_int_list(text, "list"); });
  fuzz::expect_only_errors([&] { (void)parse_dtype(text); });
  fuzz::expect_only_errors([&] { (void)parse_reduce_op(text); });
  return 0;
}
