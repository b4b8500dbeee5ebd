// The kernels' lane vectors against the scalar code they stand in for: fast_exp lane by lane
// gives the scalar function's bits, and the lanes combine in the documented order.
#include "kernels/lane_vector.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace shardwise::kernels::detail {
namespace {

// Both forms in one function, cloned like the kernels: on this machine the comparison runs in
// the clone the kernels run in (with FMA where the machine has it).
SHARDWISE_CPU_CLONES
std::size_t exp_mismatches(const float* x, std::size_t count) {
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i + kLanes <= count; i += kLanes) {
    const LaneVector lanes = fast_exp(load_lanes(x + i));
    for (std::size_t l = 0; l < kLanes; ++l) {
      const float scalar = fast_exp(x[i + l]);
      if (std::bit_cast<std::uint32_t>(lanes[l]) != std::bit_cast<std::uint32_t>(scalar) &&
          !(std::isnan(lanes[l]) && std::isnan(scalar))) {
        ++mismatches;
      }
    }
  }
  return mismatches;
}

TEST(LaneVector, FastExpGivesTheScalarBits) {
  std::vector<float> x;
  for (float v = -100.0F; v < 100.0F; v += 0.0137F) x.push_back(v);
  for (const float special :
       {0.0F, -0.0F, 1e-30F, -1e-30F, 87.9F, -87.9F, 88.0F, -87.0F, 1e30F, -1e30F,
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(special);
  }
  while (x.size() % kLanes != 0) x.push_back(1.0F);
  EXPECT_EQ(exp_mismatches(x.data(), x.size()), 0U);
  // NaN passes through; the clamps bound the rest.
  const LaneVector special = fast_exp(splat_lanes(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(fast_exp(splat_lanes(-std::numeric_limits<float>::infinity()))[3], fast_exp(-87.0F));
}

TEST(LaneVector, LanesCombineInPairsInOneOrder) {
  // Lane l holds 2^-l: pairwise sums of distinct powers of two are exact, so the order shows
  // only through a value that rounds: 1 + 2^-24 + 2^-24 is 1 in a running sum from lane 0, and
  // 1 + 2^-23 in pairs (lane 1 and lane 9 meet first).
  float lanes[kLanes] = {};
  lanes[0] = 1.0F;
  lanes[1] = std::ldexp(1.0F, -24);
  lanes[9] = std::ldexp(1.0F, -24);
  EXPECT_EQ(sum_lanes(load_lanes(lanes)), 1.0F + std::ldexp(1.0F, -23));
  float values[kLanes];
  for (std::size_t l = 0; l < kLanes; ++l) values[l] = static_cast<float>((l * 7) % 16);
  EXPECT_EQ(largest_lane(load_lanes(values)), 15.0F);
  EXPECT_EQ(sum_lanes(load_lanes(values)), 120.0F);
}

TEST(LaneVector, FirstLanesAndTails) {
  for (std::size_t count = 0; count <= kLanes + 2; ++count) {
    const LaneMask mask = first_lanes(count);
    for (std::size_t l = 0; l < kLanes; ++l) EXPECT_EQ(mask[l] != 0, l < count) << count;
  }
  const float from[3] = {1.0F, 2.0F, 3.0F};
  const LaneVector tail = load_first_lanes(from, 3, -5.0F);
  EXPECT_EQ(tail[2], 3.0F);
  EXPECT_EQ(tail[3], -5.0F);
  EXPECT_EQ(tail[15], -5.0F);
}

}  // namespace
}  // namespace shardwise::kernels::detail
