#include "shardwise/kernels/matmul.hpp"

#include <cblas.h>

#include <algorithm>

namespace shardwise::kernels {
namespace {

int blas_int(std::size_t n) { return static_cast<int>(n); }

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::size_t rows, std::size_t in, std::size_t out_features) {
  if (rows == 0 || out_features == 0) return;
  if (bias != nullptr) {
    for (std::size_t r = 0; r < rows; ++r)
      std::copy(bias, bias + out_features, out + r * out_features);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(rows), blas_int(out_features),
              blas_int(in), 1.0F, inp, blas_int(in), weight, blas_int(in),
              bias != nullptr ? 1.0F : 0.0F, out, blas_int(out_features));
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::size_t rows, std::size_t in,
                     std::size_t out_features) {
  if (rows == 0 || out_features == 0 || in == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(rows), blas_int(in),
              blas_int(out_features), 1.0F, dout, blas_int(out_features), weight, blas_int(in),
              1.0F, dinp, blas_int(in));
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_int(out_features), blas_int(in),
              blas_int(rows), 1.0F, dout, blas_int(out_features), inp, blas_int(in), 1.0F, dweight,
              blas_int(in));
  if (dbias != nullptr) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = dout + r * out_features;
      for (std::size_t o = 0; o < out_features; ++o) dbias[o] += row[o];
    }
  }
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace shardwise::kernels
