#include "gemm_at_b.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "parallel.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace shardwise::kernels::detail {
namespace {

// Rows of C one thread packs A for at a time (a packed block of 192 KiB) and columns of C per
// packed block of B (384 KiB): both stay in a core's L2 cache (2 MiB on the Xeon measured) with
// the tiles of C they update. Depth blocks of 128 or 256 and row blocks of 96 or 192 measured
// the same within the host's noise (118-121 GFLOP/s on one thread, 0.85 of its FMA peak).
constexpr std::size_t kRowBlock = 192;
constexpr std::size_t kColumnBlock = 384;
constexpr std::size_t kTilesPerThread = 4;

// The register tiles' shapes: rows of C (values of A broadcast in a step) by vectors of columns
// (whole vectors of B in a step).
constexpr int kAvx512Rows = 8, kAvx512Vectors = 3;  // 8 x 48
constexpr int kAvx2Rows = 6, kAvx2Vectors = 2;      // 6 x 16
// A block's last panel is rounded up to the tile's side: the packed blocks' slack.
constexpr std::size_t kWidestTileSide = 16 * kAvx512Vectors;

// A register tile's kernel: c = alpha S + beta c on the first `rows` x `cols` of the tile (c's row
// stride ldc), where S is the sum over `depth` of a[kk][r] b[kk][c] from packed panels, taken in
// order from zero; beta 0 does not read c, and otherwise c = fma(alpha, S, beta c). An edge
// tile computes whole (its panels are zero past the matrix) and stores only its corner.
using MultiplyTile = void (*)(std::size_t depth, const float* a, const float* b, float* c,
                              std::size_t ldc, std::size_t rows, std::size_t cols, float alpha,
                              float beta);

#if defined(__x86_64__)
// The accumulators stay in registers: 24 of the 32 vector registers, three for a step's row of
// B and one for the broadcast value of A.
__attribute__((target("avx512f"))) void multiply_avx512(
    std::size_t depth, const float* __restrict a, const float* __restrict b, float* __restrict c,
    std::size_t ldc, std::size_t rows, std::size_t cols, float alpha, float beta) {
  constexpr int kRows = kAvx512Rows;
  constexpr int kVectors = kAvx512Vectors;
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 3
    for (int j = 0; j < kVectors; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (std::size_t kk = 0; kk < depth; ++kk) {
    __m512 row[kVectors];
#pragma GCC unroll 3
    for (int j = 0; j < kVectors; ++j) row[j] = _mm512_loadu_ps(b + j * 16);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const __m512 value = _mm512_set1_ps(a[i]);
#pragma GCC unroll 3
      for (int j = 0; j < kVectors; ++j) acc[i][j] = _mm512_fmadd_ps(value, row[j], acc[i][j]);
    }
    a += kRows;
    b += kVectors * 16;
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  const __m512 keep = _mm512_set1_ps(beta);
  __mmask16 columns[kVectors];
  for (int j = 0; j < kVectors; ++j) {
    const std::size_t first = static_cast<std::size_t>(j) * 16;
    const std::size_t count = cols > first ? std::min<std::size_t>(cols - first, 16) : 0;
    columns[j] = static_cast<__mmask16>((1U << count) - 1U);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
    if (static_cast<std::size_t>(i) == rows) break;
#pragma GCC unroll 3
    for (int j = 0; j < kVectors; ++j) {
      float* to = c + static_cast<std::size_t>(i) * ldc + static_cast<std::size_t>(j) * 16;
      const __m512 sum =
          beta == 0.0F
              ? _mm512_mul_ps(scale, acc[i][j])
              : _mm512_fmadd_ps(scale, acc[i][j],
                                _mm512_mul_ps(keep, _mm512_maskz_loadu_ps(columns[j], to)));
      _mm512_mask_storeu_ps(to, columns[j], sum);
    }
  }
}

// 12 of the 16 vector registers accumulate, two hold B's row, one the broadcast.
__attribute__((target("avx2,fma"))) void multiply_avx2(std::size_t depth, const float* __restrict a,
                                                       const float* __restrict b,
                                                       float* __restrict c, std::size_t ldc,
                                                       std::size_t rows, std::size_t cols,
                                                       float alpha, float beta) {
  constexpr int kRows = kAvx2Rows;
  constexpr int kVectors = kAvx2Vectors;
  __m256 acc[kRows][kVectors];
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int j = 0; j < kVectors; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (std::size_t kk = 0; kk < depth; ++kk) {
    __m256 row[kVectors];
#pragma GCC unroll 2
    for (int j = 0; j < kVectors; ++j) row[j] = _mm256_loadu_ps(b + j * 8);
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const __m256 value = _mm256_set1_ps(a[i]);
#pragma GCC unroll 2
      for (int j = 0; j < kVectors; ++j) acc[i][j] = _mm256_fmadd_ps(value, row[j], acc[i][j]);
    }
    a += kRows;
    b += kVectors * 8;
  }
  const __m256 scale = _mm256_set1_ps(alpha);
  const __m256 keep = _mm256_set1_ps(beta);
  // The lanes of each vector inside the tile's columns (an edge tile's last vectors are partly or
  // wholly outside): all ones where stored.
  __m256i columns[kVectors];
  for (int j = 0; j < kVectors; ++j) {
    const auto first = static_cast<int>(j * 8);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    columns[j] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols) - first), lane);
  }
  const bool whole = cols == kVectors * 8;
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    if (static_cast<std::size_t>(i) == rows) break;
#pragma GCC unroll 2
    for (int j = 0; j < kVectors; ++j) {
      float* to = c + static_cast<std::size_t>(i) * ldc + static_cast<std::size_t>(j) * 8;
      if (beta == 0.0F) {
        const __m256 sum = _mm256_mul_ps(scale, acc[i][j]);
        whole ? _mm256_storeu_ps(to, sum) : _mm256_maskstore_ps(to, columns[j], sum);
      } else {
        const __m256 old = whole ? _mm256_loadu_ps(to) : _mm256_maskload_ps(to, columns[j]);
        const __m256 sum = _mm256_fmadd_ps(scale, acc[i][j], _mm256_mul_ps(keep, old));
        whole ? _mm256_storeu_ps(to, sum) : _mm256_maskstore_ps(to, columns[j], sum);
      }
    }
  }
}
#endif

// A register tile's kernel with its shape.
template <std::size_t Rows, std::size_t Cols, MultiplyTile Multiply>
struct Tile {
  static constexpr std::size_t kRows = Rows;
  static constexpr std::size_t kCols = Cols;
  static constexpr MultiplyTile multiply = Multiply;
};

// `depth` rows of `width` values each (row kk at src + kk * ld) as panels of `Panel` columns:
// panel p's row kk at dst + (p * depth + kk) * Panel, zeros past `width`. A whole panel's row is
// a copy of a constant size, which the compiler writes as a few vector moves.
template <std::size_t Panel>
void pack_panels(float* __restrict dst, const float* __restrict src, std::size_t ld,
                 std::size_t depth, std::size_t width) {
  const std::size_t whole = width / Panel;
  const std::size_t tail = width - whole * Panel;
  for (std::size_t kk = 0; kk < depth; ++kk) {
    const float* row = src + kk * ld;
    for (std::size_t p = 0; p < whole; ++p) {
      std::memcpy(dst + (p * depth + kk) * Panel, row + p * Panel, Panel * sizeof(float));
    }
    if (tail != 0) {
      float* to = dst + (whole * depth + kk) * Panel;
      std::copy(row + whole * Panel, row + width, to);
      std::fill(to + tail, to + Panel, 0.0F);
    }
  }
}

// A thread's packed blocks, kept between calls, 64-byte aligned.
struct PackBuffers {
  std::vector<float> storage;
  float* a = nullptr;
  float* b = nullptr;
  PackBuffers() {
    constexpr std::size_t kAlign = 16;  // floats
    const std::size_t a_floats = kDepthBlock * (kRowBlock + kWidestTileSide);
    const std::size_t b_floats = kDepthBlock * (kColumnBlock + kWidestTileSide);
    storage.resize(a_floats + b_floats + kAlign);
    const auto address = reinterpret_cast<std::uintptr_t>(storage.data());
    const std::size_t skip = (kAlign - (address / sizeof(float)) % kAlign) % kAlign;
    a = storage.data() + skip;
    b = a + a_floats;
  }
};

struct Product {
  std::size_t m, n, k;
  float alpha;
  const float* a;
  std::size_t lda;
  const float* b;
  std::size_t ldb;
  float beta;
  float* c;
  std::size_t ldc;
};

// Rows [first_row, last_row) and columns [first_col, last_col) of C.
template <class Tile>
void product_block(const Product& p, std::size_t first_row, std::size_t last_row,
                   std::size_t first_col, std::size_t last_col) {
  constexpr std::size_t kRows = Tile::kRows, kCols = Tile::kCols;
  thread_local PackBuffers buffers;
  for (std::size_t jc = first_col; jc < last_col; jc += kColumnBlock) {
    const std::size_t nc = std::min(kColumnBlock, last_col - jc);
    for (std::size_t pc = 0; pc < p.k; pc += kDepthBlock) {
      const std::size_t kc = std::min(kDepthBlock, p.k - pc);
      // The first depth block scales C by beta, the others add to it.
      const float beta = pc == 0 ? p.beta : 1.0F;
      pack_panels<kCols>(buffers.b, p.b + pc * p.ldb + jc, p.ldb, kc, nc);
      for (std::size_t ic = first_row; ic < last_row; ic += kRowBlock) {
        const std::size_t mc = std::min(kRowBlock, last_row - ic);
        pack_panels<kRows>(buffers.a, p.a + pc * p.lda + ic, p.lda, kc, mc);
        // A's panel of a tile row (8 KiB) stays in the L1 cache while B's panels come from L2:
        // inside small's step the weight gradients took 1.12-1.13x the input gradients' time
        // this way round and 1.14-1.17x the other (3 runs each).
        for (std::size_t ir = 0; ir < mc; ir += kRows) {
          const float* a_panel = buffers.a + ir * kc;
          for (std::size_t jr = 0; jr < nc; jr += kCols) {
            const float* b_panel = buffers.b + jr * kc;
            const std::size_t cols = std::min(kCols, nc - jr);
            float* c = p.c + (ic + ir) * p.ldc + jc + jr;
            Tile::multiply(kc, a_panel, b_panel, c, p.ldc, std::min(kRows, mc - ir), cols, p.alpha,
                           beta);
          }
        }
      }
    }
  }
}

}  // namespace

bool tile_kernel_supported(TileKernel kernel) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (kernel == TileKernel::kAvx512) return __builtin_cpu_supports("avx512f") != 0;
  return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
#else
  (void)kernel;
  return false;
#endif
}

std::optional<TileKernel> best_tile_kernel() {
  static const std::optional<TileKernel> best = []() -> std::optional<TileKernel> {
    if (tile_kernel_supported(TileKernel::kAvx512)) return TileKernel::kAvx512;
    if (tile_kernel_supported(TileKernel::kAvx2)) return TileKernel::kAvx2;
    return std::nullopt;
  }();
  return best;
}

void gemm_at_b(TileKernel kernel, std::size_t m, std::size_t n, std::size_t k, float alpha,
               const float* a, std::size_t lda, const float* b, std::size_t ldb, float beta,
               float* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta C
    for (std::size_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (std::size_t j = 0; j < n; ++j) row[j] = beta == 0.0F ? 0.0F : beta * row[j];
    }
    return;
  }
  const Product product{m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
  // The threads split C's longer side, so that each packs only its part of the larger of A
  // (k x m) and B (k x n) and all of the smaller: whole tiles, at least kTilesPerThread each
  // (a product 128 wide takes two threads).
  const auto split = [&]<class Tile>(Tile) {
    if (n > m) {
      const std::size_t col_tiles = (n + Tile::kCols - 1) / Tile::kCols;
      parallel_split(col_tiles, kTilesPerThread, [&](std::size_t first, std::size_t last) {
        product_block<Tile>(product, 0, m, first * Tile::kCols, std::min(n, last * Tile::kCols));
      });
    } else {
      const std::size_t row_tiles = (m + Tile::kRows - 1) / Tile::kRows;
      parallel_split(row_tiles, kTilesPerThread, [&](std::size_t first, std::size_t last) {
        product_block<Tile>(product, first * Tile::kRows, std::min(m, last * Tile::kRows), 0, n);
      });
    }
  };
#if defined(__x86_64__)
  if (kernel == TileKernel::kAvx512) {
    split(Tile<kAvx512Rows, 16 * kAvx512Vectors, multiply_avx512>{});
  } else {
    split(Tile<kAvx2Rows, 8 * kAvx2Vectors, multiply_avx2>{});
  }
#else
  (void)kernel;
  (void)split;
  throw std::logic_error("no tile kernel on this architecture");
#endif
}

}  // namespace shardwise::kernels::detail
