#pragma once
// The one matrix product every kernel uses: row-major C = alpha op(A) op(B) + beta C, on
// oneDNN's sgemm (and a packed kernel of our own for large weight gradients), chosen by
// measurement (docs/dependencies.md), or on MKL where a user selects it (blas_library.hpp). Threads
// follow the calling thread's OpenMP setting (set_blas_threads), so ranks that are threads of one
// process each keep their own.

#include <cstddef>

namespace shardwise::kernels::detail {

void sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
           const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
           std::size_t ldc);

}  // namespace shardwise::kernels::detail
