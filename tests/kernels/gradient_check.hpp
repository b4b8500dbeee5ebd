#pragma once
// Central-difference gradient checks for the kernels' tests: a loss is the sum of a kernel's
// outputs weighted by a fixed random probe, so d loss / d out = probe is what backward gets.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace shardwise::kernels::testing {

inline std::vector<float> random_values(std::size_t count, unsigned seed, float scale = 1.0F) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0F, scale);
  std::vector<float> values(count);
  for (float& v : values) v = normal(gen);
  return values;
}

inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& probe) {
  double sum = 0;
  for (std::size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * probe[i];
  return sum;
}

// Compares `analytic` (d loss / d input) with central differences of `loss` at every element
// of `input` (perturbed in place and restored).
inline void expect_gradient(std::vector<float>& input, const std::vector<float>& analytic,
                            const std::function<double()>& loss, const std::string& what,
                            float step = 1e-2F, double tolerance = 1e-2) {
  ASSERT_EQ(input.size(), analytic.size()) << what;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const float saved = input[i];
    input[i] = saved + step;
    const double up = loss();
    input[i] = saved - step;
    const double down = loss();
    input[i] = saved;
    const double numeric = (up - down) / (2.0 * static_cast<double>(step));
    EXPECT_NEAR(analytic[i], numeric, tolerance * std::max(1.0, std::abs(numeric)))
        << what << " element " << i;
  }
}

}  // namespace shardwise::kernels::testing
