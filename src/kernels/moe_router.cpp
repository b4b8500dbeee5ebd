#include "shardwise/kernels/moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "parallel.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::kernels {
namespace {

// torch.topk on a CPU (ATen's topk_impl_loop): (value, index) pairs ordered by value, a NaN above
// every number; std::partial_sort where k x 64 <= n, else std::nth_element and a sort of the first
// k - 1. The same algorithms on the same pairs choose the same experts among equal values.
using Candidate = std::pair<float, std::int64_t>;

bool above(const Candidate& x, const Candidate& y) {
  return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
}

void top_k(std::vector<Candidate>& queue, std::size_t k) {
  const auto first = queue.begin();
  const auto kth = first + static_cast<std::ptrdiff_t>(k);
  if (k * 64 <= queue.size()) {
    std::partial_sort(first, kth, queue.end(), above);
  } else {
    std::nth_element(first, kth - 1, queue.end(), above);
    std::sort(first, kth - 1, above);
  }
}

}  // namespace

void route_forward(std::int32_t* chosen, float* weights, float* probabilities, const float* logits,
                   std::size_t tokens, std::size_t experts, std::size_t k, bool renormalize,
                   const float* bias) {
  detail::parallel_for(tokens, 64, [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t) {
      const float* z = logits + t * experts;
      float* p = probabilities + t * experts;
      const float largest = *std::max_element(z, z + experts);
      float sum = 0;
      for (std::size_t e = 0; e < experts; ++e) {
        p[e] = std::exp(z[e] - largest);
        sum += p[e];
      }
      for (std::size_t e = 0; e < experts; ++e) p[e] /= sum;
    }
  });
  choose_experts(chosen, weights, probabilities, tokens, experts, k, renormalize, bias);
}

void choose_experts(std::int32_t* chosen, float* weights, const float* probabilities,
                    std::size_t tokens, std::size_t experts, std::size_t k, bool renormalize,
                    const float* bias) {
  detail::parallel_for(tokens, 64, [&](std::size_t begin, std::size_t end) {
    std::vector<Candidate> queue(experts);
    for (std::size_t t = begin; t < end; ++t) {
      const float* p = probabilities + t * experts;
      for (std::size_t e = 0; e < experts; ++e) {
        queue[e] = {bias != nullptr ? p[e] + bias[e] : p[e], static_cast<std::int64_t>(e)};
      }
      top_k(queue, k);
      float chosen_sum = 0;
      for (std::size_t j = 0; j < k; ++j) chosen_sum += p[queue[j].second];
      for (std::size_t j = 0; j < k; ++j) {
        const float probability = p[queue[j].second];
        chosen[t * k + j] = static_cast<std::int32_t>(queue[j].second);
        weights[t * k + j] = renormalize ? probability / chosen_sum : probability;
      }
    }
  });
}

void update_expert_bias(float* bias, const double* counts, std::size_t experts, double rate) {
  double mean = 0;
  for (std::size_t e = 0; e < experts; ++e) mean += counts[e];
  mean /= static_cast<double>(experts);
  std::vector<double> move(experts);
  double centre = 0;
  for (std::size_t e = 0; e < experts; ++e) {
    const double gap = mean - counts[e];
    move[e] = gap > 0 ? rate : gap < 0 ? -rate : 0.0;
    centre += move[e];
  }
  centre /= static_cast<double>(experts);
  for (std::size_t e = 0; e < experts; ++e) {
    bias[e] = static_cast<float>(static_cast<double>(bias[e]) + (move[e] - centre));
  }
}

void route_backward(float* dlogits, const float* dweights, const float* dprobability,
                    const float* probabilities, const std::int32_t* chosen, std::size_t tokens,
                    std::size_t experts, std::size_t k, bool renormalize) {
  detail::parallel_for(tokens, 64, [&](std::size_t begin, std::size_t end) {
    std::vector<float> dp(experts);
    for (std::size_t t = begin; t < end; ++t) {
      const float* p = probabilities + t * experts;
      const std::int32_t* e = chosen + t * k;
      const float* dw = dweights + t * k;
      if (dprobability != nullptr) {
        std::copy(dprobability, dprobability + experts, dp.begin());
      } else {
        std::fill(dp.begin(), dp.end(), 0.0F);
      }
      // w_j = s_j / S with S the chosen probabilities' sum: ds_j = (dw_j - sum_i dw_i w_i) / S.
      float sum = 0, weighted = 0;
      for (std::size_t j = 0; j < k; ++j) sum += p[e[j]];
      for (std::size_t j = 0; j < k; ++j) weighted += dw[j] * (p[e[j]] / sum);
      for (std::size_t j = 0; j < k; ++j) {
        dp[static_cast<std::size_t>(e[j])] += renormalize ? (dw[j] - weighted) / sum : dw[j];
      }
      // The softmax: dz = p (dp - sum_e p_e dp_e).
      double inner = 0;
      for (std::size_t x = 0; x < experts; ++x) inner += static_cast<double>(p[x]) * dp[x];
      float* dz = dlogits + t * experts;
      for (std::size_t x = 0; x < experts; ++x) {
        dz[x] = p[x] * (dp[x] - static_cast<float>(inner));
      }
    }
  });
}

void add_routing_statistics(double* assignments, double* probability_sums,
                            const float* probabilities, const std::int32_t* chosen,
                            std::size_t tokens, std::size_t experts, std::size_t k) {
  for (std::size_t t = 0; t < tokens; ++t) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::int32_t e = chosen[t * k + j];
      if (e < 0 || static_cast<std::size_t>(e) >= experts) {
        throw InvalidArgument("a routing chose expert " + std::to_string(e) + " of " +
                              std::to_string(experts));
      }
      assignments[e] += 1;
    }
    const float* row = probabilities + t * experts;
    for (std::size_t e = 0; e < experts; ++e) probability_sums[e] += row[e];
  }
}

double load_balancing_loss(const double* assignments, const double* probability_sums,
                           std::size_t experts, double rows) {
  if (rows == 0) return 0;
  double sum = 0;
  for (std::size_t e = 0; e < experts; ++e) {
    sum += (assignments[e] / rows) * (probability_sums[e] / rows);
  }
  return sum * static_cast<double>(experts);
}

void load_balancing_gradient(float* dprobability, const double* assignments, std::size_t experts,
                             double rows, double scale) {
  for (std::size_t e = 0; e < experts; ++e) {
    dprobability[e] = rows == 0 ? 0.0F
                                : static_cast<float>(scale * static_cast<double>(experts) *
                                                     assignments[e] / (rows * rows));
  }
}

}  // namespace shardwise::kernels
