#pragma once
// Matrix products on AMX's bf16 tiles (Intel Sapphire Rapids onward) for attention's tiles,
// whose operands attention packs itself. oneDNN's bf16 matmul has a cost per call that 64 x 256
// tiles do not pay back (docs/benchmarks.md); these tiles ran 64 x 256 x 64 products at 480-730
// GFLOP/s on one core, where float32 FMAs peak near 140. AVX512_BF16's dot products were no
// faster than float32 FMAs on that core (95 GFLOP/s), so there is no kernel for them here.
//
// Each tile's sum runs over the depth in steps of 32 in order (each step's 32 products summed by
// the hardware), so a product's bits do not depend on the caller's thread count.

#include <cstddef>
#include <cstdint>

#include "shardwise/core/half.hpp"

namespace shardwise::kernels::detail {

// Whether this process runs AMX's bf16 tiles: the CPU has them and Linux lets this process use
// their registers (asked once; false on other systems and architectures).
[[nodiscard]] bool amx_available();

// The depth and the side of the tiles' blocks: operands are padded to them.
inline constexpr std::size_t kAmxDepthStep = 32;
inline constexpr std::size_t kAmxSide = 16;

// Rounds n up to a multiple of `step`.
constexpr std::size_t round_up(std::size_t n, std::size_t step) {
  return (n + step - 1) / step * step;
}

// C (m x n floats, row stride ldc) = A B, or C += A B where `accumulate`.
// - A: bf16, row-major, row stride lda; round_up(m, 16) rows of `depth` elements readable.
// - B: in pairs along the depth (AMX's layout): element (kk, j) of B is the half of 32-bit word
//   b[(kk / 2) * ldb + j] that kk % 2 picks (low half for even kk); depth / 2 rows of
//   round_up(n, 16) words readable.
// depth must be a multiple of kAmxDepthStep; operands past the matrices are the caller's padding
// (zeros where they must add nothing). C outside its m x n is never touched. amx_available()
// must be true. The calling thread's tile registers are configured here and released before
// returning.
void amx_product(std::size_t m, std::size_t n, std::size_t depth, const BFloat16* a,
                 std::size_t lda, const std::uint32_t* b, std::size_t ldb, bool accumulate,
                 float* c, std::size_t ldc);

}  // namespace shardwise::kernels::detail
