#include "detail/bpe_merge.hpp"

#include <functional>
#include <queue>
#include <utility>

namespace shardwise::text::detail {
namespace {

// A candidate merge of the symbol at `position` with the one after it.
struct Candidate {
  std::uint32_t position;
  std::uint32_t rank;
  std::int32_t merged;
  // Pops first from a std::priority_queue: the lowest rank, the leftmost among equal ranks.
  bool operator<(const Candidate& other) const {
    if (rank != other.rank) return rank > other.rank;
    return position > other.position;
  }
};

// Short words (nearly every piece a byte-level pre-tokenizer makes): one heap.
class CandidateHeap {
 public:
  explicit CandidateHeap(std::vector<Candidate> initial)
      : heap_(std::less<Candidate>{}, std::move(initial)) {}
  [[nodiscard]] bool empty() const { return heap_.empty(); }
  void push(const Candidate& candidate) { heap_.push(candidate); }
  Candidate pop() {
    const Candidate top = heap_.top();
    heap_.pop();
    return top;
  }

 private:
  std::priority_queue<Candidate> heap_;
};

// Long words: the same order from a list per rank, sorted by position, and a heap of the ranks
// that have candidates. Candidates of a rank nearly always arrive left to right (the first ones
// in word order; later ones as a rank's merges sweep the word), and are then appended; the few
// that arrive left of the list's last wait in a small heap beside it.
class CandidateBuckets {
 public:
  [[nodiscard]] bool empty() const { return ranks_.empty(); }

  void push(const Candidate& candidate) {
    Bucket& bucket = buckets_[candidate.rank];
    if (bucket.empty()) {
      ranks_.push(candidate.rank);
      bucket.merged = candidate.merged;
      bucket.sorted.clear();
      bucket.next = 0;
    }
    if (bucket.sorted.size() == bucket.next || candidate.position >= bucket.sorted.back()) {
      bucket.sorted.push_back(candidate.position);
    } else {
      bucket.late.push(candidate.position);
    }
  }

  Candidate pop() {
    const std::uint32_t rank = ranks_.top();
    Bucket& bucket = buckets_[rank];
    std::uint32_t position = 0;
    if (!bucket.late.empty() &&
        (bucket.next == bucket.sorted.size() || bucket.late.top() < bucket.sorted[bucket.next])) {
      position = bucket.late.top();
      bucket.late.pop();
    } else {
      position = bucket.sorted[bucket.next++];
    }
    if (bucket.empty()) ranks_.pop();
    return {position, rank, bucket.merged};
  }

 private:
  template <typename T>
  using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;
  struct Bucket {
    std::vector<std::uint32_t> sorted;
    std::size_t next = 0;  // the first of `sorted` not popped
    MinHeap<std::uint32_t> late;
    std::int32_t merged = 0;
    [[nodiscard]] bool empty() const { return next == sorted.size() && late.empty(); }
  };
  std::unordered_map<std::uint32_t, Bucket> buckets_;
  MinHeap<std::uint32_t> ranks_;
};

// From this many symbols a word's candidates go in buckets: below it one heap is faster.
constexpr std::size_t kLongWord = 512;

template <typename Queue>
void merge_all(std::vector<Symbol>& symbols, const MergeRanks& ranks, Queue& queue) {
  const auto find_merge = [&](std::int32_t left, std::int32_t right) -> const MergeRank* {
    const auto it = ranks.find(pair_key(left, right));
    return it == ranks.end() ? nullptr : &it->second;
  };
  while (!queue.empty()) {
    const Candidate top = queue.pop();
    Symbol& symbol = symbols[top.position];
    if (symbol.length == 0 || symbol.next == kNoSymbol) continue;
    const Symbol right = symbols[symbol.next];
    // A candidate whose pair has changed since it was queued: the library tells them by the
    // merged id alone, and so does this.
    const MergeRank* current = find_merge(symbol.id, right.id);
    if (current == nullptr || current->merged != top.merged) continue;
    symbols[symbol.next].length = 0;
    symbol.id = top.merged;
    symbol.length += right.length;
    symbol.next = right.next;
    if (right.next != kNoSymbol) symbols[right.next].prev = top.position;
    if (symbol.prev != kNoSymbol) {
      if (const MergeRank* merge = find_merge(symbols[symbol.prev].id, symbol.id)) {
        queue.push({symbol.prev, merge->rank, merge->merged});
      }
    }
    if (symbol.next != kNoSymbol) {
      if (const MergeRank* merge = find_merge(symbol.id, symbols[symbol.next].id)) {
        queue.push({top.position, merge->rank, merge->merged});
      }
    }
  }
}

}  // namespace

void merge_symbols(std::vector<Symbol>& symbols, const MergeRanks& ranks) {
  // The candidates of the word as it stands, left to right.
  const auto each_initial = [&](auto&& take) {
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks.find(pair_key(symbols[i].id, symbols[i + 1].id));
      if (it != ranks.end()) {
        take(Candidate{static_cast<std::uint32_t>(i), it->second.rank, it->second.merged});
      }
    }
  };
  if (symbols.size() < kLongWord) {
    std::vector<Candidate> initial;
    initial.reserve(symbols.size());
    each_initial([&](const Candidate& candidate) { initial.push_back(candidate); });
    CandidateHeap queue(std::move(initial));
    merge_all(symbols, ranks, queue);
  } else {
    CandidateBuckets queue;
    each_initial([&](const Candidate& candidate) { queue.push(candidate); });
    merge_all(symbols, ranks, queue);
  }
}

}  // namespace shardwise::text::detail
