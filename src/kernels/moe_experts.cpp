#include "shardwise/kernels/moe_experts.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "parallel.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::kernels {

ExpertGroups group_by_expert(const std::int32_t* chosen, std::size_t tokens, std::size_t k,
                             std::size_t experts, const std::uint8_t* dropped) {
  const std::size_t choices = tokens * k;
  ExpertGroups g;
  g.offsets.assign(experts + 1, 0);
  std::size_t kept = 0;
  for (std::size_t c = 0; c < choices; ++c) {
    const std::int32_t e = chosen[c];
    if (e < 0 || static_cast<std::size_t>(e) >= experts) {
      throw InvalidArgument("choice " + std::to_string(c) + " names expert " + std::to_string(e) +
                            "; there are " + std::to_string(experts));
    }
    if (dropped != nullptr && dropped[c] != 0) continue;
    ++g.offsets[static_cast<std::size_t>(e) + 1];
    ++kept;
  }
  for (std::size_t e = 0; e < experts; ++e) g.offsets[e + 1] += g.offsets[e];
  g.token.resize(kept);
  g.choice.resize(kept);
  g.row.assign(choices, -1);
  std::vector<std::size_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (std::size_t c = 0; c < choices; ++c) {
    if (dropped != nullptr && dropped[c] != 0) continue;
    const std::size_t r = next[static_cast<std::size_t>(chosen[c])]++;
    g.token[r] = static_cast<std::int32_t>(c / k);
    g.choice[r] = static_cast<std::int32_t>(c);
    g.row[c] = static_cast<std::int32_t>(r);
  }
  return g;
}

std::size_t expert_capacity(double factor, std::size_t seq, std::size_t k, std::size_t experts) {
  const double wanted = std::ceil(factor * static_cast<double>(seq) * static_cast<double>(k) /
                                  static_cast<double>(experts));
  return wanted < 1 ? 1 : static_cast<std::size_t>(std::min(wanted, 1e15));
}

std::size_t drop_over_capacity(std::uint8_t* dropped, const std::int32_t* chosen,
                               std::size_t tokens, std::size_t seq, std::size_t k,
                               std::size_t experts, std::size_t capacity) {
  if (seq == 0 || tokens % seq != 0) {
    throw InvalidArgument(std::to_string(tokens) + " tokens are no whole sequences of " +
                          std::to_string(seq));
  }
  std::vector<std::size_t> taken(experts);
  std::size_t count = 0;
  for (std::size_t first = 0; first < tokens; first += seq) {
    std::fill(taken.begin(), taken.end(), 0);
    for (std::size_t c = first * k; c < (first + seq) * k; ++c) {
      const auto e = static_cast<std::size_t>(chosen[c]);
      if (e >= experts) {
        throw InvalidArgument("choice " + std::to_string(c) + " names expert " +
                              std::to_string(chosen[c]) + "; there are " + std::to_string(experts));
      }
      dropped[c] = taken[e] >= capacity ? 1 : 0;
      if (dropped[c] != 0) {
        ++count;
      } else {
        ++taken[e];
      }
    }
  }
  return count;
}

void gather_rows(float* rows, const float* x, const ExpertGroups& groups, std::size_t hidden) {
  detail::parallel_for(groups.rows(), 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* from = x + static_cast<std::size_t>(groups.token[r]) * hidden;
      std::copy(from, from + hidden, rows + r * hidden);
    }
  });
}

void combine_rows(float* out, const float* outputs, const float* weights,
                  const ExpertGroups& groups, std::size_t tokens, std::size_t hidden,
                  std::size_t k) {
  detail::parallel_for(tokens, 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      float* o = out + t * hidden;
      std::fill(o, o + hidden, 0.0F);
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t c = t * k + j;
        if (groups.row[c] < 0) continue;
        const float w = weights[c];
        const float* y = outputs + static_cast<std::size_t>(groups.row[c]) * hidden;
        for (std::size_t i = 0; i < hidden; ++i) o[i] += w * y[i];
      }
    }
  });
}

void combine_backward(float* dweights, float* outputs, const float* dout, const float* weights,
                      const ExpertGroups& groups, std::size_t hidden) {
  for (std::size_t c = 0; c < groups.row.size(); ++c) {
    if (groups.row[c] < 0) dweights[c] = 0;
  }
  detail::parallel_for(groups.rows(), 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const auto c = static_cast<std::size_t>(groups.choice[r]);
      const float* d = dout + static_cast<std::size_t>(groups.token[r]) * hidden;
      float* y = outputs + r * hidden;
      double dot = 0;
      for (std::size_t i = 0; i < hidden; ++i) dot += static_cast<double>(d[i]) * y[i];
      dweights[c] = static_cast<float>(dot);
      const float w = weights[c];
      for (std::size_t i = 0; i < hidden; ++i) y[i] = w * d[i];
    }
  });
}

void scatter_add_rows(float* dx, const float* drows, const ExpertGroups& groups, std::size_t tokens,
                      std::size_t hidden, std::size_t k) {
  detail::parallel_for(tokens, 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      float* d = dx + t * hidden;
      for (std::size_t j = 0; j < k; ++j) {
        if (groups.row[t * k + j] < 0) continue;
        const float* g = drows + static_cast<std::size_t>(groups.row[t * k + j]) * hidden;
        for (std::size_t i = 0; i < hidden; ++i) d[i] += g[i];
      }
    }
  });
}

}  // namespace shardwise::kernels
