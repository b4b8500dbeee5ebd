#include "gemm.hpp"

#include <dnnl.h>

#include <string>

#include "gemm_at_b.hpp"
#include "mkl_sgemm.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/matmul.hpp"

// The OpenMP runtime oneDNN is built on (GCC's libgomp): its thread count is a setting of the
// calling thread. Declared here so that a compiler with another OpenMP (clang's) builds this too.
extern "C" void omp_set_num_threads(int threads);
extern "C" int omp_get_max_threads();

namespace shardwise::kernels {
namespace detail {
namespace {

// Floats of A and B together from which a product A^T B takes the packed kernel (8 MiB).
constexpr std::size_t kPackedOperandFloats = std::size_t{1} << 21;

}  // namespace

void sgemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
           const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta, float* c,
           std::size_t ldc) {
  if (m == 0 || n == 0) return;
  // MKL, where a user selected it, runs every product: its weight gradients too measured faster
  // than the packed kernel (docs/dependencies.md).
  if (mkl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  // A weight gradient's form with operands larger than the caches keep between a step's uses of
  // them: the packed kernel of gemm_at_b.hpp, where this machine has one. Within the caches
  // oneDNN's sgemm was the faster (tiny's, 2 MiB: 115-150 GFLOP/s packed against 150-175).
  // (k (m + n) >= kPackedOperandFloats, by division: no product of sizes can overflow.)
  if (trans_a && !trans_b && k > (kPackedOperandFloats - 1) / (m + n)) {
    if (const std::optional<TileKernel> kernel = best_tile_kernel()) {
      gemm_at_b(*kernel, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  const auto dim = [](std::size_t v) { return static_cast<dnnl_dim_t>(v); };
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', dim(m), dim(n), dim(k), alpha, a,
                 dim(lda), b, dim(ldb), beta, c, dim(ldc));
  if (status != dnnl_success) {
    throw Error("sgemm of " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                std::to_string(k) + " failed in oneDNN (status " +
                std::to_string(static_cast<int>(status)) + ")");
  }
}

}  // namespace detail

void set_blas_threads(int threads) { omp_set_num_threads(threads); }

int blas_threads() { return omp_get_max_threads(); }

}  // namespace shardwise::kernels
