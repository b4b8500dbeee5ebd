#pragma once
// The product on MKL, for detail::sgemm, where select_blas chose it (blas_library.hpp).

#include <cstddef>

namespace shardwise::kernels::detail {

// Row-major C = alpha op(A) op(B) + beta C on MKL where MKL is selected and every size fits
// MKL's 32-bit integers: then true. Otherwise false, and nothing is written: the caller runs
// the product on oneDNN.
bool mkl_sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
               float* c, std::size_t ldc);

}  // namespace shardwise::kernels::detail
