#include "amx_product.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define SHARDWISE_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace shardwise::kernels::detail {

#if defined(SHARDWISE_AMX)
namespace {

// Linux's request for a state component (arch_prctl) and AMX's tile data component: a process
// must ask before its first tile instruction, or that instruction faults.
constexpr int kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
constexpr int kTileData = 18;               // XFEATURE_XTILEDATA

// AMX's bf16 tiles, with AVX512BW and AVX512_BF16 for packing their operands.
bool cpu_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool tile = ((edx >> 24) & 1U) != 0;
  const bool bf16 = ((edx >> 22) & 1U) != 0;
  const bool avx512bw = ((ebx >> 30) & 1U) != 0;
  if (!tile || !bf16 || !avx512bw) return false;
  // AVX512_BF16, with which attention packs AMX's operands (amx_packing.hpp).
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0 || ((eax >> 5) & 1U) == 0) {
    return false;
  }
  // The OS saves the tile state (XCR0 bits 17 and 18), which needs OSXSAVE to read XCR0.
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || ((ecx >> 27) & 1U) == 0) return false;
  unsigned low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  // ... and the AVX-512 state (bits 5-7) with the SSE and AVX state (1, 2).
  return ((low >> 17) & 3U) == 3U && (low & 0xE6U) == 0xE6U;
}

// AMX's tile configuration (palette 1): every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// Tiles 0-3 accumulate a 2 x 2 block of C, 4-5 hold A's rows, 6-7 B's columns.
__attribute__((target("amx-tile"))) void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = kAmxSide;
  }
  // As an asm statement, not _tile_loadconfig: GCC 12 dropped the stores filling `config` as
  // dead before the intrinsic read it, and the next tile instruction faulted.
  __asm__ volatile("ldtilecfg %0" : : "m"(config));
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

// Where one 16 x 16 tile of C is loaded from and stored to: C itself where the tile lies inside
// it, else a bounce buffer holding its corner (zeros elsewhere).
struct CTile {
  float* at = nullptr;
  std::size_t stride = 0;   // bytes
  float* corner = nullptr;  // C's corner, when bounced
  std::size_t rows = 0, cols = 0;
};

CTile place(float* c, std::size_t ldc, std::size_t rows, std::size_t cols, bool accumulate,
            float* bounce) {
  if (rows == kAmxSide && cols == kAmxSide) return {c, ldc * sizeof(float), nullptr, rows, cols};
  std::fill(bounce, bounce + kAmxSide * kAmxSide, 0.0F);
  if (accumulate) {
    for (std::size_t r = 0; r < rows; ++r)
      std::copy(c + r * ldc, c + r * ldc + cols, bounce + r * kAmxSide);
  }
  return {bounce, kAmxSide * sizeof(float), c, rows, cols};
}

void unbounce(const CTile& tile, std::size_t ldc) {
  if (tile.corner == nullptr) return;
  for (std::size_t r = 0; r < tile.rows; ++r) {
    std::copy(tile.at + r * kAmxSide, tile.at + r * kAmxSide + tile.cols, tile.corner + r * ldc);
  }
}

// One block of up to 2 x 2 tiles of C: `two_rows` and `two_cols` say whether its second row and
// column of tiles are used.
__attribute__((target("amx-tile,amx-bf16"))) void multiply_block(
    std::size_t depth, const BFloat16* a, std::size_t lda, const std::uint32_t* b, std::size_t ldb,
    bool accumulate, const CTile (&tiles)[4], bool two_rows, bool two_cols) {
  const std::size_t a_stride = lda * sizeof(BFloat16);
  const std::size_t b_stride = ldb * sizeof(std::uint32_t);
  if (accumulate) {
    _tile_loadd(0, tiles[0].at, tiles[0].stride);
    if (two_cols) _tile_loadd(1, tiles[1].at, tiles[1].stride);
    if (two_rows) _tile_loadd(2, tiles[2].at, tiles[2].stride);
    if (two_rows && two_cols) _tile_loadd(3, tiles[3].at, tiles[3].stride);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (std::size_t kk = 0; kk < depth; kk += kAmxDepthStep) {
    _tile_loadd(4, a + kk, a_stride);
    _tile_loadd(6, b + (kk / 2) * ldb, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    if (two_cols) {
      _tile_loadd(7, b + (kk / 2) * ldb + kAmxSide, b_stride);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (two_rows) {
      _tile_loadd(5, a + kAmxSide * lda + kk, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      if (two_cols) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, tiles[0].at, tiles[0].stride);
  if (two_cols) _tile_stored(1, tiles[1].at, tiles[1].stride);
  if (two_rows) _tile_stored(2, tiles[2].at, tiles[2].stride);
  if (two_rows && two_cols) _tile_stored(3, tiles[3].at, tiles[3].stride);
}

}  // namespace

bool amx_available() {
  static const bool available =
      cpu_has_amx_bf16() && syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  return available;
}

void amx_product(std::size_t m, std::size_t n, std::size_t depth, const BFloat16* a,
                 std::size_t lda, const std::uint32_t* b, std::size_t ldb, bool accumulate,
                 float* c, std::size_t ldc) {
  if (depth % kAmxDepthStep != 0) {
    throw std::logic_error("amx_product: a depth of " + std::to_string(depth) +
                           " is not a multiple of 32");
  }
  if (m == 0 || n == 0) return;
  configure_tiles();
  alignas(64) float bounce[4][kAmxSide * kAmxSide];
  constexpr std::size_t kBlock = 2 * kAmxSide;
  for (std::size_t i0 = 0; i0 < m; i0 += kBlock) {
    const std::size_t rows = std::min(kBlock, m - i0);
    for (std::size_t j0 = 0; j0 < n; j0 += kBlock) {
      const std::size_t cols = std::min(kBlock, n - j0);
      const bool two_rows = rows > kAmxSide, two_cols = cols > kAmxSide;
      CTile tiles[4];
      for (std::size_t t = 0; t < 4; ++t) {
        const std::size_t ti = t / 2, tj = t % 2;
        if ((ti == 1 && !two_rows) || (tj == 1 && !two_cols)) continue;
        const std::size_t tile_rows = std::min(kAmxSide, rows - ti * kAmxSide);
        const std::size_t tile_cols = std::min(kAmxSide, cols - tj * kAmxSide);
        tiles[t] = place(c + (i0 + ti * kAmxSide) * ldc + j0 + tj * kAmxSide, ldc, tile_rows,
                         tile_cols, accumulate, bounce[t]);
      }
      multiply_block(depth, a + i0 * lda, lda, b + j0, ldb, accumulate, tiles, two_rows, two_cols);
      for (const CTile& tile : tiles) unbounce(tile, ldc);
    }
  }
  release_tiles();
}

#else

bool amx_available() { return false; }

void amx_product(std::size_t, std::size_t, std::size_t, const BFloat16*, std::size_t,
                 const std::uint32_t*, std::size_t, bool, float*, std::size_t) {
  throw std::logic_error("amx_product: no AMX on this system");
}

#endif

}  // namespace shardwise::kernels::detail
