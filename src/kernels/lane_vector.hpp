#pragma once
// A row reduction's kLanes partial results held as one vector value (GCC's and clang's vector
// extension): lane l takes the columns l, l + kLanes, ... and the lanes are combined in one
// fixed order at the end, so a row's result depends neither on the machine's vector width nor on
// the thread count. As arrays of 16 floats, GCC compiled these loops into shuffles and spills
// (LayerNorm's backward ran at 3 ns an element) and combined the lanes through the stack (a
// store-forwarding stall per row, a fifth of tiny's softmax); as a vector value they stay in
// registers on every instruction set the kernels are cloned for.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fast_math.hpp"

namespace shardwise::kernels::detail {

// Passed by value between inline functions only: see the note on calling conventions in
// fast_math.hpp, whose pragma covers this header.

static_assert(kLanes == 16, "the lane shuffles below are written for 16 lanes");

using LaneVector = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneMask = std::int32_t __attribute__((vector_size(kLanes * sizeof(std::int32_t))));
using LaneBits = std::uint32_t __attribute__((vector_size(kLanes * sizeof(std::uint32_t))));

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

// All ones in the lanes below `count` (0 to kLanes), zero in the rest: a select's condition.
[[gnu::always_inline]] inline LaneMask first_lanes(std::size_t count) {
  constexpr LaneMask kIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return kIndex < static_cast<std::int32_t>(count < kLanes ? count : kLanes);
}

// `count` (< kLanes) values from `from` in the first lanes, `fill` in the rest: a row's tail.
[[gnu::always_inline]] inline LaneVector load_first_lanes(const float* from, std::size_t count,
                                                          float fill) {
  float lanes[kLanes];
  for (std::size_t l = 0; l < kLanes; ++l) lanes[l] = l < count ? from[l] : fill;
  return load_lanes(lanes);
}

// std::max lane by lane, in std::max's order: (a < b) ? b : a.
[[gnu::always_inline]] inline LaneVector max_lanes(LaneVector a, LaneVector b) {
  return a < b ? b : a;
}

// The lanes combined pairwise: lane l with lane l + 8, then l + 4, l + 2 and l + 1, four steps
// in registers where one running total had sixteen dependent adds. Written out for each
// combination rather than through a function object: a LaneVector must never be passed to a
// call that is not inlined, whose calling convention differs between the clones (unoptimised
// builds call a lambda's operator()).
#define SHARDWISE_COMBINE_LANES(v, combine)                                                      \
  do {                                                                                           \
    v = combine(                                                                                 \
        v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)); \
    v = combine(                                                                                 \
        v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)); \
    v = combine(                                                                                 \
        v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)); \
    v = combine(                                                                                 \
        v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)); \
  } while (false)

[[gnu::always_inline]] inline LaneVector add_lanes(LaneVector a, LaneVector b) { return a + b; }

[[gnu::always_inline]] inline float sum_lanes(LaneVector v) {
  SHARDWISE_COMBINE_LANES(v, add_lanes);
  return v[0];
}

[[gnu::always_inline]] inline float largest_lane(LaneVector v) {
  SHARDWISE_COMBINE_LANES(v, max_lanes);
  return v[0];
}

#undef SHARDWISE_COMBINE_LANES

// fast_exp lane by lane: fast_math.hpp's body, so each lane's result is the scalar function's,
// bit for bit (tests/kernels/lane_vector_test.cpp).
[[gnu::always_inline]] inline LaneVector fast_exp(LaneVector x) {
  return exp_of<LaneVector, LaneBits>(x);
}

}  // namespace shardwise::kernels::detail
