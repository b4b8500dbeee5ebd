#include "shardwise/kernels/adamw.hpp"

#include <cmath>

#include "fast_math.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

// The settings as values, not through the reference the caller passed (which the stores to the
// arrays might alias, so that every iteration reloaded them), and the arrays restrict: the loop
// vectorises, for each instruction set the machine has.
SHARDWISE_CPU_CLONES
void adamw_range(float* __restrict params, const float* __restrict grads, float* __restrict m,
                 float* __restrict v, std::size_t count, float b1, float b2, float correction1,
                 float correction2, float learning_rate, float eps, float weight_decay,
                 float grad_scale) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * grad_scale;
    const float m_i = b1 * m[i] + (1.0F - b1) * g;
    const float v_i = b2 * v[i] + (1.0F - b2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / correction1;
    const float v_hat = v_i / correction2;
    params[i] -= learning_rate * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
  }
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t count,
                  const AdamWSettings& settings, std::int64_t step) {
  const float b1 = settings.beta1;
  const float b2 = settings.beta2;
  const auto t = static_cast<float>(step);
  const float correction1 = 1.0F - std::pow(b1, t);
  const float correction2 = 1.0F - std::pow(b2, t);
  const AdamWSettings s = settings;
  detail::parallel_for(count, std::size_t{1} << 14, [&](std::size_t first, std::size_t last) {
    adamw_range(params + first, grads + first, m + first, v + first, last - first, b1, b2,
                correction1, correction2, s.learning_rate, s.eps, s.weight_decay, s.grad_scale);
  });
}

}  // namespace shardwise::kernels
