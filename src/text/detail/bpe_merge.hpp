#pragma once
// Merging one word's symbols as the library's Word::merge_all does: the lowest-ranked pair
// anywhere in the word first, the leftmost among equal ranks, until no pair has a merge. A word
// may be a whole text (SentencePiece-style tokenizers do not split it): the cost is
// O(n log n) in its length, and long words take their candidates from lists sorted by position
// rather than from one heap of millions.

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace shardwise::text::detail {

inline constexpr std::uint32_t kNoSymbol = std::numeric_limits<std::uint32_t>::max();

// A symbol of a word being merged: a list linked by index (kNoSymbol at the ends), a merged-away
// one of length 0. 16 bytes.
struct Symbol {
  std::int32_t id;
  std::uint32_t prev;
  std::uint32_t next;
  std::uint32_t length;  // bytes
};

struct MergeRank {
  std::uint32_t rank;
  std::int32_t merged;  // the id of the pair's two tokens joined
};
// By pair_key(left, right).
using MergeRanks = std::unordered_map<std::uint64_t, MergeRank>;

[[nodiscard]] inline std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
         static_cast<std::uint32_t>(right);
}

// Merges `symbols` (linked in order, fewer than kNoSymbol) in place.
void merge_symbols(std::vector<Symbol>& symbols, const MergeRanks& ranks);

}  // namespace shardwise::text::detail
