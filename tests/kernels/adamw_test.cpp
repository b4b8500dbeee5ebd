#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "shardwise/kernels/adamw.hpp"

namespace shardwise::kernels {
namespace {

// Two steps against the update written out in double: bias correction, decoupled decay.
TEST(AdamW, MatchesTheUpdateWrittenOut) {
  AdamWSettings settings;
  settings.learning_rate = 0.1F;
  settings.weight_decay = 0.01F;
  std::vector<float> params{1.0F, -2.0F, 0.5F};
  std::vector<float> m(3), v(3);
  std::vector<double> p{1.0, -2.0, 0.5}, md(3), vd(3);
  const std::vector<std::vector<float>> grads{{0.3F, -0.1F, 0.0F}, {-0.2F, 0.4F, 1.0F}};
  for (int step = 1; step <= 2; ++step) {
    const auto& g = grads[static_cast<std::size_t>(step - 1)];
    adamw_update(params.data(), g.data(), m.data(), v.data(), 3, settings, step);
    for (std::size_t i = 0; i < 3; ++i) {
      md[i] = 0.9 * md[i] + 0.1 * g[i];
      vd[i] = 0.95 * vd[i] + 0.05 * g[i] * g[i];
      const double m_hat = md[i] / (1 - std::pow(0.9, step));
      const double v_hat = vd[i] / (1 - std::pow(0.95, step));
      p[i] -= 0.1 * (m_hat / (std::sqrt(v_hat) + 1e-8) + 0.01 * p[i]);
      EXPECT_NEAR(params[i], p[i], 1e-6) << "step " << step << " element " << i;
    }
  }
  // The first step moves every element with a gradient by about the learning rate.
  std::vector<float> fresh{0.0F}, zero_m(1), zero_v(1);
  const float g = 123.0F;
  AdamWSettings plain;
  plain.learning_rate = 0.01F;
  adamw_update(fresh.data(), &g, zero_m.data(), zero_v.data(), 1, plain, 1);
  EXPECT_NEAR(fresh[0], -0.01F, 1e-6);
}

// Clipping's scale applied inside the update equals the update of the scaled gradients, and the
// gradients themselves are left as they were.
TEST(AdamW, TheGradientScaleIsAppliedInTheUpdate) {
  const std::vector<float> grads{0.5F, -2.0F, 3.0F, 1e-3F};
  std::vector<float> halved = grads;
  for (float& g : halved) g *= 0.25F;
  AdamWSettings settings;
  settings.weight_decay = 0.1F;
  std::vector<float> p1(4, 1.0F), m1(4), v1(4), p2(4, 1.0F), m2(4), v2(4);
  adamw_update(p1.data(), halved.data(), m1.data(), v1.data(), 4, settings, 3);
  settings.grad_scale = 0.25F;
  std::vector<float> unscaled = grads;
  adamw_update(p2.data(), unscaled.data(), m2.data(), v2.data(), 4, settings, 3);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(p2[i], p1[i]);
    EXPECT_FLOAT_EQ(m2[i], m1[i]);
    EXPECT_FLOAT_EQ(v2[i], v1[i]);
  }
  EXPECT_EQ(unscaled, grads);
}

}  // namespace
}  // namespace shardwise::kernels
