// A Mixture-of-Experts layer's kernels: the router chooses as transformers' routers do
// (torch.topk's choices among equal probabilities included), its backward is the gradient of the
// chosen weights and of the probabilities, the auxiliary loss is transformers'
// load_balancing_loss_func, and the grouped experts compute each token's weighted experts with
// every gradient checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gradient_check.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/moe_experts.hpp"
#include "shardwise/kernels/moe_router.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::kernels {
namespace {

using testing::expect_gradient;
using testing::random_values;
using testing::weighted_sum;

struct Routed {
  std::vector<std::int32_t> chosen;
  std::vector<float> weights, probabilities;
};

Routed route(const std::vector<float>& logits, std::size_t experts, std::size_t k,
             bool renormalize) {
  const std::size_t tokens = logits.size() / experts;
  Routed r{std::vector<std::int32_t>(tokens * k), std::vector<float>(tokens * k),
           std::vector<float>(tokens * experts)};
  route_forward(r.chosen.data(), r.weights.data(), r.probabilities.data(), logits.data(), tokens,
                experts, k, renormalize);
  return r;
}

// What torch 2.15's torch.topk(torch.softmax(logits, -1), k) chose on a CPU, for logits of equal
// values (every probability ties) and for three equal largest among six.
TEST(MoeRouter, ChoosesAmongEqualProbabilitiesAsTorchTopkDoes) {
  const struct {
    std::size_t experts, k;
    std::vector<std::int32_t> torch;
  } cases[] = {{4, 2, {2, 3}},
               {8, 2, {6, 5}},
               {64, 4, {42, 43, 44, 41}},
               {128, 2, {0, 1}},  // k x 64 <= experts: torch's partial sort
               {6, 3, {3, 5, 4}}};
  for (const auto& c : cases) {
    const Routed r = route(std::vector<float>(c.experts, 0.0F), c.experts, c.k, true);
    EXPECT_EQ(r.chosen, c.torch) << c.experts << " experts, top " << c.k;
    for (const float w : r.weights) EXPECT_FLOAT_EQ(w, 1.0F / static_cast<float>(c.k));
  }
  const std::vector<float> logits{0.1F, 2.0F, 2.0F, -1.0F, 2.0F, 0.5F};
  EXPECT_EQ(route(logits, 6, 2, true).chosen, (std::vector<std::int32_t>{2, 4}));
  EXPECT_EQ(route(logits, 6, 3, true).chosen, (std::vector<std::int32_t>{2, 4, 1}));
}

// torchtitan's expert bias: added to the probabilities for the choice alone, the weights the
// chosen experts' own probabilities; its update moves each bias by the rate toward the experts
// chosen less than the mean, the moves centred.
TEST(MoeRouter, AnExpertBiasChoosesButDoesNotWeigh) {
  const std::vector<float> logits{1.0F, 3.0F, 0.0F, 2.0F};
  std::vector<float> probabilities(4);
  std::vector<std::int32_t> chosen(2);
  std::vector<float> weights(2);
  const std::vector<float> bias{0.0F, -1.0F, 0.9F, 0.0F};  // expert 1 out, expert 2 in
  for (const bool renormalize : {true, false}) {
    route_forward(chosen.data(), weights.data(), probabilities.data(), logits.data(), 1, 4, 2,
                  renormalize, bias.data());
    // Biased: 0.087, -0.36, 0.93, 0.237 (probabilities 0.087, 0.64, 0.032, 0.237).
    EXPECT_EQ(chosen, (std::vector<std::int32_t>{2, 3}));
    const float sum = renormalize ? probabilities[2] + probabilities[3] : 1.0F;
    EXPECT_FLOAT_EQ(weights[0], probabilities[2] / sum);
    EXPECT_FLOAT_EQ(weights[1], probabilities[3] / sum);
    std::vector<std::int32_t> again(2);
    std::vector<float> again_weights(2);
    choose_experts(again.data(), again_weights.data(), probabilities.data(), 1, 4, 2, renormalize,
                   bias.data());
    EXPECT_EQ(again, chosen);
    EXPECT_EQ(again_weights, weights);
  }
  std::vector<float> moved{0.5F, 0.0F, 0.0F, 0.0F};
  const std::vector<double> counts{10, 2, 6, 6};  // mean 6: expert 0 above, 1 below, 2 and 3 at
  update_expert_bias(moved.data(), counts.data(), 4, 0.01);
  // Moves -0.01, +0.01, 0, 0; their mean is 0.
  EXPECT_FLOAT_EQ(moved[0], 0.49F);
  EXPECT_FLOAT_EQ(moved[1], 0.01F);
  EXPECT_FLOAT_EQ(moved[2], 0.0F);
  const std::vector<double> skewed{9, 1, 1, 1};  // mean 3: moves -r, +r, +r, +r, centred
  std::vector<float> zero(4, 0.0F);
  update_expert_bias(zero.data(), skewed.data(), 4, 0.01);
  EXPECT_FLOAT_EQ(zero[0], -0.015F);
  EXPECT_FLOAT_EQ(zero[1], 0.005F);
  EXPECT_NEAR(zero[0] + zero[1] + zero[2] + zero[3], 0.0, 1e-9);
}

// Largest first; weights the probabilities, renormalised over the chosen or not; probabilities
// the softmax.
TEST(MoeRouter, WeightsAreTheChosenProbabilitiesLargestFirst) {
  const std::vector<float> logits{1.0F, 3.0F, 0.0F, 2.0F};
  double sum = 0;
  for (const float z : logits) sum += std::exp(z);
  for (const bool renormalize : {true, false}) {
    const Routed r = route(logits, 4, 2, renormalize);
    EXPECT_EQ(r.chosen, (std::vector<std::int32_t>{1, 3}));
    for (std::size_t e = 0; e < 4; ++e) {
      EXPECT_NEAR(r.probabilities[e], std::exp(logits[e]) / sum, 1e-7);
    }
    const double p1 = std::exp(3.0) / sum, p3 = std::exp(2.0) / sum;
    EXPECT_NEAR(r.weights[0], renormalize ? p1 / (p1 + p3) : p1, 1e-7);
    EXPECT_NEAR(r.weights[1], renormalize ? p3 / (p1 + p3) : p3, 1e-7);
  }
}

// loss = sum probe . weights + sum over rows of dprobability . probabilities: route_backward's
// dlogits is its gradient, renormalised or not, for one to all experts chosen.
TEST(GradientCheck, MoeRouter) {
  constexpr std::size_t kTokens = 5, kExperts = 6;
  for (const std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{3}, kExperts}) {
    for (const bool renormalize : {true, false}) {
      // Spread logits: no two probabilities close enough for a step to change a choice.
      std::vector<float> logits = random_values(kTokens * kExperts, 3, 2.0F);
      const std::vector<float> probe = random_values(kTokens * k, 4);
      const std::vector<float> dprobability = random_values(kExperts, 5);
      const auto loss = [&] {
        const Routed r = route(logits, kExperts, k, renormalize);
        double sum = weighted_sum(r.weights, probe);
        for (std::size_t t = 0; t < kTokens; ++t) {
          for (std::size_t e = 0; e < kExperts; ++e) {
            sum += static_cast<double>(dprobability[e]) * r.probabilities[t * kExperts + e];
          }
        }
        return sum;
      };
      const Routed r = route(logits, kExperts, k, renormalize);
      std::vector<float> dlogits(logits.size());
      route_backward(dlogits.data(), probe.data(), dprobability.data(), r.probabilities.data(),
                     r.chosen.data(), kTokens, kExperts, k, renormalize);
      expect_gradient(logits, dlogits, loss,
                      "top " + std::to_string(k) + (renormalize ? " renormalised" : ""), 1e-3F,
                      2e-2);
    }
  }
}

// transformers' load_balancing_loss_func: experts x sum_e (assignments_e / rows) (probability
// sums_e / rows), over every layer's rows together; and its gradient in each row's probability.
TEST(MoeRouter, TheLoadBalancingLossIsTransformers) {
  // Two layers of two tokens, 3 experts, top 1: experts chosen 0, 0 and 1, 2; probability sums.
  const double assignments[] = {2, 1, 1};
  const double sums[] = {1.5, 1.25, 1.25};
  const double rows = 4;
  EXPECT_DOUBLE_EQ(load_balancing_loss(assignments, sums, 3, rows),
                   3 * (0.5 * 0.375 + 0.25 * 0.3125 + 0.25 * 0.3125));
  EXPECT_EQ(load_balancing_loss(assignments, sums, 3, 0), 0);
  // Balanced routing with uniform probabilities gives 1 x k (here k = 1).
  const double even[] = {2, 2};
  const double half[] = {2, 2};
  EXPECT_DOUBLE_EQ(load_balancing_loss(even, half, 2, 4), 1.0);
  // d loss / d p_te = experts x assignments_e / rows^2, times the coefficient.
  float gradient[3];
  load_balancing_gradient(gradient, assignments, 3, rows, 0.02);
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_FLOAT_EQ(gradient[e], static_cast<float>(0.02 * 3 * assignments[e] / 16));
  }
}

// The auxiliary loss through the router: its gradient in the logits, the choices held fixed.
TEST(GradientCheck, MoeLoadBalancingLossThroughTheRouter) {
  constexpr std::size_t kTokens = 6, kExperts = 4, kK = 2;
  std::vector<float> logits = random_values(kTokens * kExperts, 7, 2.0F);
  const auto sums = [&](const Routed& r, std::vector<double>& assignments,
                        std::vector<double>& probability_sums) {
    assignments.assign(kExperts, 0);
    probability_sums.assign(kExperts, 0);
    for (const std::int32_t e : r.chosen) assignments[static_cast<std::size_t>(e)] += 1;
    for (std::size_t i = 0; i < r.probabilities.size(); ++i) {
      probability_sums[i % kExperts] += r.probabilities[i];
    }
  };
  const auto loss = [&] {
    const Routed r = route(logits, kExperts, kK, true);
    std::vector<double> assignments, probability_sums;
    sums(r, assignments, probability_sums);
    return load_balancing_loss(assignments.data(), probability_sums.data(), kExperts, kTokens);
  };
  const Routed r = route(logits, kExperts, kK, true);
  std::vector<double> assignments, probability_sums;
  sums(r, assignments, probability_sums);
  std::vector<float> dprobability(kExperts);
  load_balancing_gradient(dprobability.data(), assignments.data(), kExperts, kTokens, 1.0);
  const std::vector<float> no_weights(kTokens * kK, 0.0F);
  std::vector<float> dlogits(logits.size());
  route_backward(dlogits.data(), no_weights.data(), dprobability.data(), r.probabilities.data(),
                 r.chosen.data(), kTokens, kExperts, kK, true);
  expect_gradient(logits, dlogits, loss, "auxiliary loss", 1e-3F, 2e-2);
}

TEST(MoeExperts, GroupsTheChoicesByExpertInTheTokensOrder) {
  // Three tokens, top 2, four experts; expert 2 is nobody's.
  const std::vector<std::int32_t> chosen{1, 0, 3, 1, 0, 3};
  const ExpertGroups g = group_by_expert(chosen.data(), 3, 2, 4);
  EXPECT_EQ(g.offsets, (std::vector<std::size_t>{0, 2, 4, 4, 6}));
  EXPECT_EQ(g.token, (std::vector<std::int32_t>{0, 2, 0, 1, 1, 2}));
  EXPECT_EQ(g.choice, (std::vector<std::int32_t>{1, 4, 0, 3, 2, 5}));
  for (std::size_t c = 0; c < chosen.size(); ++c) {
    EXPECT_EQ(g.choice[static_cast<std::size_t>(g.row[c])], static_cast<std::int32_t>(c));
  }
  EXPECT_EQ(g.count(2), 0U);
  const std::vector<std::int32_t> outside{0, 4};
  EXPECT_THROW((void)group_by_expert(outside.data(), 1, 2, 4), InvalidArgument);
  const std::vector<std::int32_t> negative{-1, 0};
  EXPECT_THROW((void)group_by_expert(negative.data(), 1, 2, 4), InvalidArgument);
}

// A capacity per sequence: each expert takes the first `capacity` choices of each sequence in
// token order; the others have no row, add nothing and get no weight gradient.
TEST(MoeExperts, ACapacityDropsEachSequencesLaterChoices) {
  EXPECT_EQ(expert_capacity(1.0, 4, 2, 4), 2U);   // ceil(4 x 2 / 4)
  EXPECT_EQ(expert_capacity(1.25, 4, 2, 4), 3U);  // ceil(2.5)
  EXPECT_EQ(expert_capacity(0.01, 4, 2, 4), 1U);  // at least one
  // Two sequences of three tokens, top 2 of 3 experts, capacity 2 a sequence.
  const std::vector<std::int32_t> chosen{0, 1, 0, 2, 0, 1,   // expert 0's third choice dropped
                                         1, 2, 1, 2, 2, 1};  // 1's and 2's third dropped
  std::vector<std::uint8_t> dropped(chosen.size());
  EXPECT_EQ(drop_over_capacity(dropped.data(), chosen.data(), 6, 3, 2, 3, 2), 3U);
  EXPECT_EQ(dropped, (std::vector<std::uint8_t>{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1}));
  const ExpertGroups g = group_by_expert(chosen.data(), 6, 2, 3, dropped.data());
  EXPECT_EQ(g.rows(), 9U);
  EXPECT_EQ(g.offsets, (std::vector<std::size_t>{0, 2, 6, 9}));
  for (const std::size_t c : {4U, 10U, 11U}) EXPECT_EQ(g.row[c], -1) << c;
  // Token 2's output is its kept choice alone; the dropped choice's weight gets no gradient.
  const std::size_t hidden = 2;
  std::vector<float> outputs(g.rows() * hidden);
  for (std::size_t r = 0; r < g.rows(); ++r) {
    outputs[r * hidden] = static_cast<float>(r + 1);
    outputs[r * hidden + 1] = 1;
  }
  const std::vector<float> weights(12, 0.5F);
  std::vector<float> out(6 * hidden);
  combine_rows(out.data(), outputs.data(), weights.data(), g, 6, hidden, 2);
  EXPECT_FLOAT_EQ(out[2 * hidden + 1], 0.5F);  // one kept choice of weight 0.5
  EXPECT_FLOAT_EQ(out[2 * hidden], 0.5F * static_cast<float>(g.row[5] + 1));
  std::vector<float> dweights(12, 7.0F);
  const std::vector<float> dout(6 * hidden, 1.0F);
  combine_backward(dweights.data(), outputs.data(), dout.data(), weights.data(), g, hidden);
  for (const std::size_t c : {4U, 10U, 11U}) EXPECT_EQ(dweights[c], 0.0F) << c;
  EXPECT_GT(dweights[5], 0.0F);
  std::vector<float> dx(6 * hidden, 0.0F);
  scatter_add_rows(dx.data(), outputs.data(), g, 6, hidden, 2);
  EXPECT_FLOAT_EQ(dx[2 * hidden + 1], 0.5F);  // the kept choice's row gradient only
  std::vector<std::uint8_t> short_sequence(5);
  EXPECT_THROW((void)drop_over_capacity(short_sequence.data(), chosen.data(), 5, 3, 1, 3, 2),
               InvalidArgument);
}

// The experts' layer composed of the row kernels and float32 products, as the chunk's part
// composes them: gathered rows, each expert's gate and up product over its block, SwiGLU, the
// down product, the weighted combination.
struct Layer {
  static constexpr std::size_t kTokens = 5, kHidden = 4, kWidth = 3, kExperts = 4, kK = 2;
  std::vector<float> x = random_values(kTokens * kHidden, 11);
  std::vector<float> gate_up = random_values(kExperts * 2 * kWidth * kHidden, 12, 0.5F);
  std::vector<float> down = random_values(kExperts * kHidden * kWidth, 13, 0.5F);
  std::vector<float> weights = random_values(kTokens * kK, 14);
  // Expert 2 is nobody's: its block is empty.
  std::vector<std::int32_t> chosen{0, 1, 3, 0, 1, 3, 0, 1, 3, 0};
  ExpertGroups groups = group_by_expert(chosen.data(), kTokens, kK, kExperts);
  std::vector<float> inputs, gate_up_rows, activation, outputs;

  std::vector<float> forward() {
    const std::size_t rows = groups.rows(), C = kHidden, I = kWidth;
    inputs.assign(rows * C, 0.0F);
    gate_up_rows.assign(rows * 2 * I, 0.0F);
    activation.assign(rows * I, 0.0F);
    outputs.assign(rows * C, 0.0F);
    gather_rows(inputs.data(), x.data(), groups, C);
    for (std::size_t e = 0; e < kExperts; ++e) {
      const std::size_t n = groups.count(e), at = groups.offsets[e];
      if (n == 0) continue;
      matmul_forward(gate_up_rows.data() + at * 2 * I, inputs.data() + at * C,
                     gate_up.data() + e * 2 * I * C, nullptr, n, C, 2 * I);
      swiglu_rows_forward(activation.data() + at * I, gate_up_rows.data() + at * 2 * I, n, I);
      matmul_forward(outputs.data() + at * C, activation.data() + at * I, down.data() + e * C * I,
                     nullptr, n, I, C);
    }
    std::vector<float> out(kTokens * C);
    combine_rows(out.data(), outputs.data(), weights.data(), groups, kTokens, C, kK);
    return out;
  }
  // dx += the tokens' gradients, dweights written, dgate_up and ddown added into.
  void backward(std::vector<float>& dx, std::vector<float>& dweights, std::vector<float>& dgate_up,
                std::vector<float>& ddown, const std::vector<float>& dout) {
    const std::size_t C = kHidden, I = kWidth;
    combine_backward(dweights.data(), outputs.data(), dout.data(), weights.data(), groups, C);
    for (std::size_t e = 0; e < kExperts; ++e) {
      const std::size_t n = groups.count(e), at = groups.offsets[e];
      if (n == 0) continue;
      matmul_backward(activation.data() + at * I, ddown.data() + e * C * I, nullptr,
                      outputs.data() + at * C, activation.data() + at * I, down.data() + e * C * I,
                      n, I, C, InputGradient::kOverwrite);
      swiglu_rows_backward(gate_up_rows.data() + at * 2 * I, activation.data() + at * I,
                           gate_up_rows.data() + at * 2 * I, n, I, InputGradient::kOverwrite);
      matmul_backward(inputs.data() + at * C, dgate_up.data() + e * 2 * I * C, nullptr,
                      gate_up_rows.data() + at * 2 * I, inputs.data() + at * C,
                      gate_up.data() + e * 2 * I * C, n, C, 2 * I, InputGradient::kOverwrite);
    }
    scatter_add_rows(dx.data(), inputs.data(), groups, kTokens, C, kK);
  }
};

// Each token's output is the sum of its choices' weights times their experts, computed here one
// token at a time in double, as transformers' loop over the experts computes it.
TEST(MoeExperts, EachTokenIsItsWeightedExperts) {
  Layer l;
  const std::vector<float> out = l.forward();
  constexpr std::size_t C = Layer::kHidden, I = Layer::kWidth;
  for (std::size_t t = 0; t < Layer::kTokens; ++t) {
    std::vector<double> expected(C, 0.0);
    for (std::size_t j = 0; j < Layer::kK; ++j) {
      const auto e = static_cast<std::size_t>(l.chosen[t * Layer::kK + j]);
      const float* gu = l.gate_up.data() + e * 2 * I * C;
      const float* dn = l.down.data() + e * C * I;
      std::vector<double> act(I);
      for (std::size_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (std::size_t c = 0; c < C; ++c) {
          g += static_cast<double>(gu[i * C + c]) * l.x[t * C + c];
          u += static_cast<double>(gu[(I + i) * C + c]) * l.x[t * C + c];
        }
        act[i] = g / (1 + std::exp(-g)) * u;
      }
      for (std::size_t c = 0; c < C; ++c) {
        double y = 0;
        for (std::size_t i = 0; i < I; ++i) y += static_cast<double>(dn[c * I + i]) * act[i];
        expected[c] += l.weights[t * Layer::kK + j] * y;
      }
    }
    for (std::size_t c = 0; c < C; ++c) {
      EXPECT_NEAR(out[t * C + c], expected[c], 1e-5) << "token " << t << " element " << c;
    }
  }
}

// loss = probe . out: the row kernels' backward (the combination's, SwiGLU's over fused rows,
// the scatter's) with the products' gives the gradient in the tokens, the weights and both
// matrices of every expert (the unchosen expert's: zero).
TEST(GradientCheck, MoeExperts) {
  Layer l;
  const std::vector<float> probe = random_values(Layer::kTokens * Layer::kHidden, 15);
  const auto loss = [&] { return weighted_sum(l.forward(), probe); };
  (void)l.forward();
  std::vector<float> dx(l.x.size(), 0.5F);  // added into
  std::vector<float> dweights(l.weights.size());
  std::vector<float> dgate_up(l.gate_up.size(), 0.0F), ddown(l.down.size(), 0.0F);
  l.backward(dx, dweights, dgate_up, ddown, probe);
  for (float& d : dx) d -= 0.5F;
  expect_gradient(l.x, dx, loss, "tokens", 1e-2F, 1e-2);
  expect_gradient(l.weights, dweights, loss, "weights", 1e-2F, 1e-2);
  expect_gradient(l.gate_up, dgate_up, loss, "gate_up", 1e-2F, 1e-2);
  expect_gradient(l.down, ddown, loss, "down", 1e-2F, 1e-2);
  const std::size_t unchosen = 2 * Layer::kWidth * Layer::kHidden;
  for (std::size_t i = 2 * unchosen; i < 3 * unchosen; ++i) EXPECT_EQ(dgate_up[i], 0.0F);
}

// choose_experts on route_forward's probabilities is route_forward's choice: what backward
// recomputes instead of keeping.
TEST(MoeRouter, TheChoiceFromTheProbabilitiesIsTheRoutersChoice) {
  const std::vector<float> logits = random_values(7 * 8, 21);
  for (const bool renormalize : {true, false}) {
    const Routed r = route(logits, 8, 3, renormalize);
    std::vector<std::int32_t> chosen(r.chosen.size());
    std::vector<float> weights(r.weights.size());
    choose_experts(chosen.data(), weights.data(), r.probabilities.data(), 7, 8, 3, renormalize);
    EXPECT_EQ(chosen, r.chosen);
    EXPECT_EQ(weights, r.weights);
  }
  // In place: the probabilities over the logits.
  std::vector<float> in_place = logits;
  std::vector<std::int32_t> chosen(7 * 3);
  std::vector<float> weights(7 * 3);
  route_forward(chosen.data(), weights.data(), in_place.data(), in_place.data(), 7, 8, 3, true);
  EXPECT_EQ(in_place, route(logits, 8, 3, true).probabilities);
}

}  // namespace
}  // namespace shardwise::kernels
