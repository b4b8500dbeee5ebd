#include "shardwise/kernels/adamw.hpp"

#include <cmath>

#include "parallel.hpp"

namespace shardwise::kernels {

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t count,
                  const AdamWSettings& settings, std::int64_t step) {
  const float b1 = settings.beta1;
  const float b2 = settings.beta2;
  const auto t = static_cast<float>(step);
  const float correction1 = 1.0F - std::pow(b1, t);
  const float correction2 = 1.0F - std::pow(b2, t);
  detail::parallel_for(count, std::size_t{1} << 14, [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) {
      const float g = grads[i] * settings.grad_scale;
      m[i] = b1 * m[i] + (1.0F - b1) * g;
      v[i] = b2 * v[i] + (1.0F - b2) * g * g;
      const float m_hat = m[i] / correction1;
      const float v_hat = v[i] / correction2;
      params[i] -= settings.learning_rate *
                   (m_hat / (std::sqrt(v_hat) + settings.eps) + settings.weight_decay * params[i]);
    }
  });
}

}  // namespace shardwise::kernels
