#pragma once
// LayerNorm over the last dimension (width `channels`), with weight and bias, eps 1e-5, as
// nn.LayerNorm. Forward keeps each row's mean and reciprocal standard deviation for backward,
// which adds into the gradients.

#include <cstddef>

namespace shardwise::kernels {

inline constexpr float kLayerNormEps = 1e-5F;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t rows, std::size_t channels);

// sum = a + b (the residual stream's add), then out = LayerNorm(sum): layernorm_forward of
// residual_forward's result, bit for bit, in one pass over the rows. `sum` overlaps neither a nor
// b nor out.
void residual_layernorm_forward(float* sum, float* out, float* mean, float* rstd, const float* a,
                                const float* b, const float* weight, const float* bias,
                                std::size_t rows, std::size_t channels);

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::size_t rows, std::size_t channels);

}  // namespace shardwise::kernels
