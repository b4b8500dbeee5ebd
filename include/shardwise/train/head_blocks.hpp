#pragma once
// How a vocabulary-parallel output head runs: its logits, probabilities and their gradients a
// block of rows at a time, so that no batch x seq x vocabulary buffer lives across a step.

#include <algorithm>
#include <cstddef>

namespace shardwise::train {

// A block holds at most kHeadBlockFloats floats of a rank's vocabulary (128 KiB: a byte
// vocabulary's 128 rows, which stay in cache; 2^20 floats kept 1 MiB of blocks for llama-tiny's
// 512 rows, 0.1 MiB a sequence, at no measurable gain in speed), but at least kHeadBlockMinRows
// rows (where the batch has them): a block's products stream the head's whole weight, and fewer
// rows than that would stream it many times per step for a large vocabulary (SmolLM2's 49152
// would otherwise run 21 rows a block at 2^20 floats, 100 passes over 113 MB for 2048 rows).
inline constexpr std::size_t kHeadBlockFloats = std::size_t{1} << 15;
inline constexpr std::size_t kHeadBlockMinRows = 128;

// The rows of one block for `rows` rows of `vocab_local` logits each: at least one, at most rows.
[[nodiscard]] inline std::size_t head_block_rows(std::size_t rows, std::size_t vocab_local) {
  const std::size_t by_size = kHeadBlockFloats / std::max<std::size_t>(vocab_local, 1);
  return std::max<std::size_t>(1, std::min(rows, std::max(by_size, kHeadBlockMinRows)));
}

}  // namespace shardwise::train
