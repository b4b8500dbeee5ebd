#include "shardwise/kernels/moe_experts.hpp"

#include <algorithm>
#include <string>

#include "parallel.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::kernels {

ExpertGroups group_by_expert(const std::int32_t* chosen, std::size_t tokens, std::size_t k,
                             std::size_t experts) {
  const std::size_t choices = tokens * k;
  ExpertGroups g;
  g.offsets.assign(experts + 1, 0);
  for (std::size_t c = 0; c < choices; ++c) {
    const std::int32_t e = chosen[c];
    if (e < 0 || static_cast<std::size_t>(e) >= experts) {
      throw InvalidArgument("choice " + std::to_string(c) + " names expert " + std::to_string(e) +
                            "; there are " + std::to_string(experts));
    }
    ++g.offsets[static_cast<std::size_t>(e) + 1];
  }
  for (std::size_t e = 0; e < experts; ++e) g.offsets[e + 1] += g.offsets[e];
  g.token.resize(choices);
  g.choice.resize(choices);
  g.row.resize(choices);
  std::vector<std::size_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (std::size_t c = 0; c < choices; ++c) {
    const std::size_t r = next[static_cast<std::size_t>(chosen[c])]++;
    g.token[r] = static_cast<std::int32_t>(c / k);
    g.choice[r] = static_cast<std::int32_t>(c);
    g.row[c] = static_cast<std::int32_t>(r);
  }
  return g;
}

void experts_forward(float* out, const ExpertArrays& kept, const float* x, const float* gate_up,
                     const float* down, const float* weights, const ExpertGroups& groups,
                     std::size_t tokens, std::size_t hidden, std::size_t width, std::size_t k) {
  const std::size_t rows = groups.rows();
  detail::parallel_for(rows, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const float* from = x + static_cast<std::size_t>(groups.token[r]) * hidden;
      std::copy(from, from + hidden, kept.inputs + r * hidden);
    }
  });
  const std::size_t experts = groups.offsets.size() - 1;
  for (std::size_t e = 0; e < experts; ++e) {
    const std::size_t n = groups.count(e), at = groups.offsets[e];
    if (n == 0) continue;
    matmul_forward(kept.gate_up + at * 2 * width, kept.inputs + at * hidden,
                   gate_up + e * 2 * width * hidden, nullptr, n, hidden, 2 * width);
    detail::parallel_for(n, 16, [&](std::size_t first, std::size_t last) {
      for (std::size_t r = at + first; r < at + last; ++r) {
        const float* gate = kept.gate_up + r * 2 * width;
        swiglu_forward(kept.activation + r * width, gate, gate + width, width);
      }
    });
    matmul_forward(kept.outputs + at * hidden, kept.activation + at * width,
                   down + e * hidden * width, nullptr, n, width, hidden);
  }
  detail::parallel_for(tokens, 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      float* o = out + t * hidden;
      std::fill(o, o + hidden, 0.0F);
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t c = t * k + j;
        const float w = weights[c];
        const float* y = kept.outputs + static_cast<std::size_t>(groups.row[c]) * hidden;
        for (std::size_t i = 0; i < hidden; ++i) o[i] += w * y[i];
      }
    }
  });
}

void experts_backward(float* dx, float* dweights, float* dgate_up, float* ddown, const float* dout,
                      const ExpertArrays& kept, const float* gate_up, const float* down,
                      const float* weights, const ExpertGroups& groups, std::size_t tokens,
                      std::size_t hidden, std::size_t width, std::size_t k) {
  const std::size_t rows = groups.rows();
  // Each choice's weight gradient reads its row's output; then the row's output becomes its
  // gradient, weight x the token's.
  detail::parallel_for(rows, 64, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const std::size_t c = static_cast<std::size_t>(groups.choice[r]);
      const float* d = dout + static_cast<std::size_t>(groups.token[r]) * hidden;
      float* y = kept.outputs + r * hidden;
      double dot = 0;
      for (std::size_t i = 0; i < hidden; ++i) dot += static_cast<double>(d[i]) * y[i];
      dweights[c] = static_cast<float>(dot);
      const float w = weights[c];
      for (std::size_t i = 0; i < hidden; ++i) y[i] = w * d[i];
    }
  });
  const std::size_t experts = groups.offsets.size() - 1;
  for (std::size_t e = 0; e < experts; ++e) {
    const std::size_t n = groups.count(e), at = groups.offsets[e];
    if (n == 0) continue;
    // The activation's gradient over the activation, once its weight's gradient has read it.
    matmul_backward(kept.activation + at * width, ddown + e * hidden * width, nullptr,
                    kept.outputs + at * hidden, kept.activation + at * width,
                    down + e * hidden * width, n, width, hidden, InputGradient::kOverwrite);
    detail::parallel_for(n, 16, [&](std::size_t first, std::size_t last) {
      for (std::size_t r = at + first; r < at + last; ++r) {
        float* gate = kept.gate_up + r * 2 * width;
        swiglu_backward(gate, gate + width, kept.activation + r * width, gate, gate + width, width,
                        InputGradient::kOverwrite);
      }
    });
    matmul_backward(kept.inputs + at * hidden, dgate_up + e * 2 * width * hidden, nullptr,
                    kept.gate_up + at * 2 * width, kept.inputs + at * hidden,
                    gate_up + e * 2 * width * hidden, n, hidden, 2 * width,
                    InputGradient::kOverwrite);
  }
  // Each token's gradient, the sum of its choices' rows, in its choices' order.
  detail::parallel_for(tokens, 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      float* d = dx + t * hidden;
      for (std::size_t j = 0; j < k; ++j) {
        const float* g = kept.inputs + static_cast<std::size_t>(groups.row[t * k + j]) * hidden;
        for (std::size_t i = 0; i < hidden; ++i) d[i] += g[i];
      }
    }
  });
}

}  // namespace shardwise::kernels
