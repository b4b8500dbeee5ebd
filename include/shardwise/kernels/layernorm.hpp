#pragma once
// LayerNorm over the last dimension (width `channels`), with weight and bias, eps 1e-5, as
// nn.LayerNorm. Forward keeps each row's mean and reciprocal standard deviation for backward,
// which adds into the gradients.

#include <cstddef>

namespace shardwise::kernels {

inline constexpr float kLayerNormEps = 1e-5F;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t rows, std::size_t channels);

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::size_t rows, std::size_t channels);

}  // namespace shardwise::kernels
