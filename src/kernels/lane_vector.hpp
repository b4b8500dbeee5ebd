#pragma once
// A row reduction's kLanes partial results held as one vector value (GCC's and clang's vector
// extension) rather than an array: lane l still takes the columns l, l + kLanes, ... and the
// lanes are still combined in order, so the results are those of the scalar lane loops, bit for
// bit. GCC compiled the arrays' loops into shuffles and spills (LayerNorm's backward ran at 3 ns
// an element); the vector value compiles into whole-register loads, adds and FMAs on every
// instruction set the kernels are cloned for.

#include <cstddef>
#include <cstring>

#include "fast_math.hpp"

namespace shardwise::kernels::detail {

// Where the machine has no 64-byte registers the value spans two or four, and GCC notes at every
// call that such a value passed by value changes the calling convention. The functions below are
// inline and no LaneVector crosses a function a kernel file does not inline, so the note does
// not apply; it is off for the rest of each kernel file that includes this header, because GCC
// gives it where the value is used, not where the function is declared.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

using LaneVector = float __attribute__((vector_size(kLanes * sizeof(float))));

[[gnu::always_inline]] inline LaneVector load_lanes(const float* from) {
  LaneVector v;
  std::memcpy(&v, from, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store_lanes(float* to, LaneVector v) {
  std::memcpy(to, &v, sizeof v);
}

// Every lane set to `value`.
[[gnu::always_inline]] inline LaneVector splat_lanes(float value) { return LaneVector{} + value; }

// The lanes summed in lane order, as sum_lanes sums an array.
[[gnu::always_inline]] inline float sum_lanes(LaneVector v) {
  float total = 0.0F;
  for (std::size_t l = 0; l < kLanes; ++l) total += v[l];
  return total;
}

}  // namespace shardwise::kernels::detail
