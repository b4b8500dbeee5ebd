#pragma once
// A linear layer's matrix products on the BLAS (docs/dependencies.md says which and why).
// Row-major throughout: `inp` is rows x in, `weight` is out x in (as nn.Linear stores it),
// `out` is rows x out. Backward adds into the gradients (they are zeroed once per step).

#include <cstddef>

#include "shardwise/kernels/input_gradient.hpp"

namespace shardwise::kernels {

// out = inp weight^T + bias (bias may be null).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::size_t rows, std::size_t in, std::size_t out_features);

// dinp += dout weight (dinp = dout weight with kOverwrite); dweight += dout^T inp; dbias += column
// sums of dout (dbias may be null). dinp may be inp (dweight is computed before dinp is written):
// the input's gradient over the input, where nothing reads the input after.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::size_t rows, std::size_t in,
                     std::size_t out_features,
                     InputGradient input_gradient = InputGradient::kAccumulate);

// Threads the BLAS may use for one call (ranks that are threads of one process use one each).
void set_blas_threads(int threads);
// The calling thread's setting.
int blas_threads();

}  // namespace shardwise::kernels
