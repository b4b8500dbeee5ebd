#pragma once
// One AdamW step (Loshchilov and Hutter: decoupled weight decay) over `count` elements, with
// bias correction for step `step` (1 for the first). Each rank calls it on the elements it owns.

#include <cstddef>
#include <cstdint>

namespace shardwise::kernels {

struct AdamWSettings {
  float learning_rate = 3e-4F;
  float beta1 = 0.9F;
  float beta2 = 0.95F;
  float eps = 1e-8F;
  float weight_decay = 0.0F;  // 0 for norms and biases
  // What the gradients are multiplied by first (global-norm clipping), in the update's own pass
  // over them rather than a pass of its own.
  float grad_scale = 1.0F;
};

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t count,
                  const AdamWSettings& settings, std::int64_t step);

}  // namespace shardwise::kernels
