#pragma once
// What the GPT's stage tests share: token ids drawn from a seed, and the check that gradients
// held by stages (each a store of its own parameters) add up to the whole model's, by name.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "shardwise/train/parameter_store.hpp"

namespace shardwise::models::stage_checks {

inline std::vector<std::int32_t> draw_ids(std::size_t count, std::uint32_t seed,
                                          std::size_t vocab) {
  std::vector<std::int32_t> ids(count);
  std::uint32_t x = seed;
  for (auto& id : ids) {
    x = x * 1664525U + 1013904223U;
    id = static_cast<std::int32_t>((x >> 8) % vocab);
  }
  return ids;
}

// Accumulates stages' gradients by name into the whole model's layout (the tied token
// embedding's copies summed), then compares them with the whole model's.
class StageGradients {
 public:
  explicit StageGradients(const train::ParameterStore& whole)
      : whole_(whole), summed_(whole.grads().size(), 0.0) {}

  void add(const train::ParameterStore& stage) {
    for (std::size_t i = 0; i < stage.specs().size(); ++i) {
      const std::size_t w = whole_.index_of(stage.specs()[i].name);
      const float* g = stage.grads().data() + stage.offset(i);
      for (std::size_t e = 0; e < stage.count(i); ++e) summed_[whole_.offset(w) + e] += g[e];
    }
  }

  void expect_whole(const std::string& what) const {
    for (std::size_t p = 0; p < whole_.specs().size(); ++p) {
      for (std::size_t e = 0; e < whole_.count(p); ++e) {
        const double expected = whole_.grads()[whole_.offset(p) + e];
        ASSERT_NEAR(summed_[whole_.offset(p) + e], expected, 1e-5 + 1e-4 * std::abs(expected))
            << what << ": " << whole_.specs()[p].name << " element " << e;
      }
    }
  }

 private:
  const train::ParameterStore& whole_;
  std::vector<double> summed_;
};

}  // namespace shardwise::models::stage_checks
