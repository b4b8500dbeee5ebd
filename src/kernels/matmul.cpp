#include "shardwise/kernels/matmul.hpp"

#include <algorithm>

#include "bias_rows.hpp"
#include "fast_math.hpp"
#include "gemm.hpp"
#include "parallel.hpp"

namespace shardwise::kernels {
namespace {

// Columns [first, last) of the bias gradient, each column's sum in row order whatever the
// threads; restrict and cloned, so that the columns go a vector at a time.
SHARDWISE_CPU_CLONES
void add_column_sums(float* __restrict dbias, const float* __restrict dout, std::size_t rows,
                     std::size_t columns, std::size_t first, std::size_t last) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = dout + r * columns;
    for (std::size_t o = first; o < last; ++o) dbias[o] += row[o];
  }
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::size_t rows, std::size_t in, std::size_t out_features) {
  if (rows == 0 || out_features == 0) return;
  if (bias != nullptr) detail::fill_rows_with_bias(out, bias, rows, out_features);
  detail::sgemm(false, true, rows, out_features, in, 1.0F, inp, in, weight, in,
                bias != nullptr ? 1.0F : 0.0F, out, out_features);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::size_t rows, std::size_t in,
                     std::size_t out_features, InputGradient input_gradient) {
  if (rows == 0 || in == 0) return;
  if (out_features == 0) {
    if (input_gradient == InputGradient::kOverwrite) std::fill(dinp, dinp + rows * in, 0.0F);
    return;
  }
  // The weight's gradient first: inp is read for the last time there, so that dinp may be inp.
  detail::sgemm(true, false, out_features, in, rows, 1.0F, dout, out_features, inp, in, 1.0F,
                dweight, in);
  const float beta = input_gradient == InputGradient::kOverwrite ? 0.0F : 1.0F;
  detail::sgemm(false, false, rows, in, out_features, 1.0F, dout, out_features, weight, in, beta,
                dinp, in);
  if (dbias != nullptr) {
    detail::parallel_for(out_features, 32, [&](std::size_t first, std::size_t last) {
      add_column_sums(dbias, dout, rows, out_features, first, last);
    });
  }
}

}  // namespace shardwise::kernels
