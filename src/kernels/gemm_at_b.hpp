#pragma once
// C = alpha A^T B + beta C for row-major A (k x m), B (k x n) and C (m x n): a weight
// gradient's product, dY^T X, whose depth k is the batch's rows. oneDNN's sgemm ran this form
// at 0.7-0.75 of its rate on the untransposed forms inside a training step (docs/training.md,
// "The weight gradients"), yet it is the form a packed product reads most easily: row kk of A
// and of B are already the contiguous runs a register tile takes for step kk. So it has a
// kernel of its own: Goto's blocking (panels of B and of A packed per block of depth), a
// register tile per instruction set, the rows of C split among the calling thread's OpenMP
// threads.
//
// Every element of C is the same sum whatever the thread count: depth blocks of kDepthBlock in
// order, each summed from zero in order and then added (scaled by alpha) to C.

#include <cstddef>
#include <optional>

namespace shardwise::kernels::detail {

// The register tiles, by instruction set.
enum class TileKernel {
  kAvx512,  // 8 x 48: 24 accumulators of 16 floats
  kAvx2,    // 6 x 16: 12 accumulators of 8 floats (with FMA)
};

// Whether this machine runs `kernel`.
bool tile_kernel_supported(TileKernel kernel);

// The widest kernel this machine runs; none on a machine without AVX2 and FMA.
std::optional<TileKernel> best_tile_kernel();

// Depth of each block of the sum over k.
inline constexpr std::size_t kDepthBlock = 256;

// C = alpha A^T B + beta C with `kernel` (which this machine must run). beta 0 does not read C.
void gemm_at_b(TileKernel kernel, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
               float* c, std::size_t ldc);

}  // namespace shardwise::kernels::detail
