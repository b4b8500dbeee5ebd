#pragma once
// Float32 arrays packed as AMX's bf16 operands (amx_product.hpp): rows rounded to bf16, rows
// paired along the depth, and transposes of packed matrices, each padded with zeros to the
// tiles' sides. Rounding is the CPU's (AVX512_BF16's to-nearest-even, which every CPU with AMX
// has); the transposes run on packed bf16, in blocks of 16 rows that stay in the L1 cache.

#include <cstddef>
#include <cstdint>

#include "shardwise/core/half.hpp"

namespace shardwise::kernels::detail {

// Whether this CPU runs the packing below (AVX512_BF16 and AVX512BW; every CPU with AMX has them).
[[nodiscard]] bool bf16_packing_available();

// `rows` x `cols` floats (row stride `stride`) rounded into `to_rows` x `to_cols` bf16 (row
// stride to_stride), zeros past the source. to_rows >= rows, to_cols >= cols.
void round_rows(BFloat16* to, const float* from, std::size_t rows, std::size_t cols,
                std::size_t stride, std::size_t to_rows, std::size_t to_cols,
                std::size_t to_stride);

// B in pairs along its rows: word (p, c) holds the roundings of m[2p][c] (low half) and
// m[2p + 1][c], for `rows` x `cols` floats m (row stride `stride`), into `to_rows` rows of
// `width` words (row stride to_stride), zeros past the source. 2 to_rows >= rows, width >= cols.
void pair_rows(std::uint32_t* to, const float* from, std::size_t rows, std::size_t cols,
               std::size_t stride, std::size_t to_rows, std::size_t width, std::size_t to_stride);

// The transpose of packed bf16 `rows` x `cols` (row stride `stride`): to[c * to_stride + r].
void transpose_bf16(BFloat16* to, std::size_t to_stride, const BFloat16* from, std::size_t stride,
                    std::size_t rows, std::size_t cols);

// The transpose of packed bf16 in pairs, for a product against m's rows (q k^T): word (p, r) of
// `to` (row stride to_stride) pairs from[r][2p] and from[r][2p + 1], for r < rows and p < cols / 2
// (cols even).
void transpose_pairs(std::uint32_t* to, std::size_t to_stride, const BFloat16* from,
                     std::size_t stride, std::size_t rows, std::size_t cols);

}  // namespace shardwise::kernels::detail
