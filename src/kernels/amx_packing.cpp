#include "amx_packing.hpp"

#include <algorithm>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SHARDWISE_PACKING_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#else
#define SHARDWISE_PACKING_TARGET
#endif

namespace shardwise::kernels::detail {
namespace {

// Rows of a block of a transpose: 16 rows of a 64-element head are 2 KiB of bf16.
constexpr std::size_t kTransposeBlock = 16;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The first `count` lanes (of 16 or 32).
inline __mmask16 first16(std::size_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFFU) : static_cast<__mmask16>((1U << count) - 1U);
}
inline __mmask32 first32(std::size_t count) {
  return count >= 32 ? static_cast<__mmask32>(0xFFFFFFFFU)
                     : static_cast<__mmask32>((1U << count) - 1U);
}
inline std::size_t left(std::size_t valid, std::size_t at) { return valid > at ? valid - at : 0; }
#endif

}  // namespace

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

bool bf16_packing_available() {
  static const bool available =
      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return available;
}

SHARDWISE_PACKING_TARGET
void round_rows(BFloat16* to, const float* from, std::size_t rows, std::size_t cols,
                std::size_t stride, std::size_t to_rows, std::size_t to_cols,
                std::size_t to_stride) {
  for (std::size_t r = 0; r < to_rows; ++r) {
    const std::size_t valid = r < rows ? cols : 0;
    const float* row = r < rows ? from + r * stride : from;
    BFloat16* out = to + r * to_stride;
    for (std::size_t c = 0; c < to_cols; c += 32) {
      const __m512 low = _mm512_maskz_loadu_ps(first16(left(valid, c)), row + c);
      const __m512 high = _mm512_maskz_loadu_ps(first16(left(valid, c + 16)), row + c + 16);
      const __m512bh rounded = _mm512_cvtne2ps_pbh(high, low);
      _mm512_mask_storeu_epi16(out + c, first32(to_cols - c), reinterpret_cast<__m512i>(rounded));
    }
  }
}

SHARDWISE_PACKING_TARGET
void pair_rows(std::uint32_t* to, const float* from, std::size_t rows, std::size_t cols,
               std::size_t stride, std::size_t to_rows, std::size_t width, std::size_t to_stride) {
  // cvtne2ps gives the even row's 16 roundings, then the odd row's; this interleaves them.
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  for (std::size_t p = 0; p < to_rows; ++p) {
    const std::size_t even = 2 * p, odd = 2 * p + 1;
    const std::size_t even_valid = even < rows ? cols : 0, odd_valid = odd < rows ? cols : 0;
    const float* even_row = even < rows ? from + even * stride : from;
    const float* odd_row = odd < rows ? from + odd * stride : from;
    std::uint32_t* out = to + p * to_stride;
    for (std::size_t c = 0; c < width; c += 16) {
      const __m512 low = _mm512_maskz_loadu_ps(first16(left(even_valid, c)), even_row + c);
      const __m512 high = _mm512_maskz_loadu_ps(first16(left(odd_valid, c)), odd_row + c);
      const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
      _mm512_mask_storeu_epi32(out + c, first16(width - c),
                               _mm512_permutexvar_epi16(interleave, halves));
    }
  }
}

#else

bool bf16_packing_available() { return false; }

void round_rows(BFloat16*, const float*, std::size_t, std::size_t, std::size_t, std::size_t,
                std::size_t, std::size_t) {
  throw std::logic_error("round_rows: no AVX512_BF16 on this architecture");
}

void pair_rows(std::uint32_t*, const float*, std::size_t, std::size_t, std::size_t, std::size_t,
               std::size_t, std::size_t) {
  throw std::logic_error("pair_rows: no AVX512_BF16 on this architecture");
}

#endif

void transpose_bf16(BFloat16* __restrict to, std::size_t to_stride, const BFloat16* __restrict from,
                    std::size_t stride, std::size_t rows, std::size_t cols) {
  for (std::size_t r0 = 0; r0 < rows; r0 += kTransposeBlock) {
    const std::size_t r1 = std::min(rows, r0 + kTransposeBlock);
    for (std::size_t c = 0; c < cols; ++c) {
      for (std::size_t r = r0; r < r1; ++r) to[c * to_stride + r] = from[r * stride + c];
    }
  }
}

void transpose_pairs(std::uint32_t* __restrict to, std::size_t to_stride,
                     const BFloat16* __restrict from, std::size_t stride, std::size_t rows,
                     std::size_t cols) {
  for (std::size_t r0 = 0; r0 < rows; r0 += kTransposeBlock) {
    const std::size_t r1 = std::min(rows, r0 + kTransposeBlock);
    for (std::size_t p = 0; 2 * p < cols; ++p) {
      for (std::size_t r = r0; r < r1; ++r) {
        const BFloat16* pair = from + r * stride + 2 * p;
        to[p * to_stride + r] = static_cast<std::uint32_t>(pair[0].bits) |
                                (static_cast<std::uint32_t>(pair[1].bits) << 16);
      }
    }
  }
}

}  // namespace shardwise::kernels::detail
