#include "detail/bpe_model.hpp"

#include <mutex>
#include <queue>
#include <utility>

#include "detail/utf8.hpp"

namespace shardwise::text::detail {

// Words merged before, shared by every thread that encodes with one tokenizer: a mutex rather
// than the library's per-thread caches, so that a tokenizer holds no state per thread. Like the
// library's it stops growing when full (a hostile text of endless distinct words cannot grow it),
// and keeps short words only.
class BpeModel::WordCache {
 public:
  static constexpr std::size_t kCapacity = 10000;
  static constexpr std::size_t kLongestWord = 256;

  bool find(std::string_view word, std::vector<std::int32_t>& out) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = words_.find(word);
    if (it == words_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void add(std::string_view word, const std::vector<std::int32_t>& ids) {
    if (word.size() >= kLongestWord) return;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (words_.size() < kCapacity) words_.emplace(std::string(word), ids);
  }

 private:
  std::mutex mutex_;
  StringMap<std::vector<std::int32_t>> words_;
};

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) |
         static_cast<std::uint32_t>(right);
}

// A symbol of a word being merged: a list linked by index, a merged-away one of length 0.
struct Symbol {
  std::int32_t id;
  std::ptrdiff_t prev;
  std::ptrdiff_t next;
  std::size_t length;  // bytes
};

// A candidate merge of the symbol at `position` with the one after it; the queue pops the
// lowest rank, the leftmost position among equal ranks.
struct Candidate {
  std::size_t position;
  std::uint32_t rank;
  std::int32_t merged;
  bool operator<(const Candidate& other) const {
    if (rank != other.rank) return rank > other.rank;
    return position > other.position;
  }
};

}  // namespace

BpeModel::BpeModel(std::vector<std::string> tokens, const std::vector<Merge>& merges,
                   BpeSettings settings)
    : tokens_(std::move(tokens)), settings_(settings), cache_(std::make_unique<WordCache>()) {
  ids_.reserve(tokens_.size());
  for (std::size_t id = 0; id < tokens_.size(); ++id) {
    ids_.emplace(tokens_[id], static_cast<std::int32_t>(id));
  }
  ranks_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& merge = merges[rank];
    ranks_.insert_or_assign(pair_key(merge.left, merge.right),
                            Rank{static_cast<std::uint32_t>(rank), merge.merged});
  }
}

BpeModel::~BpeModel() = default;
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Rank* BpeModel::find_merge(std::int32_t left, std::int32_t right) const {
  const auto it = ranks_.find(pair_key(left, right));
  return it == ranks_.end() ? nullptr : &it->second;
}

void BpeModel::tokenize(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (piece.empty()) return;
  if (settings_.ignore_merges) {
    if (const auto id = token_to_id(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (cache_->find(piece, out)) return;
  const std::vector<std::int32_t> ids = merge_word(piece);
  cache_->add(piece, ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

std::vector<std::int32_t> BpeModel::merge_word(std::string_view word) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](std::int32_t id, std::size_t length) {
    const auto index = static_cast<std::ptrdiff_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, length});
  };
  // Each character a symbol; one the vocabulary lacks becomes the unknown id (fused with the
  // unknown before it where fuse_unknown) or, without one, nothing. `pending` bytes of
  // unknown characters wait for the next known one.
  std::size_t pending = 0;
  const auto add_pending = [&] {
    if (pending != 0) add(*settings_.unknown_id, pending);
    pending = 0;
  };
  for (std::size_t at = 0; at < word.size();) {
    const std::size_t length = utf8_length(word, at);
    if (const auto id = token_to_id(word.substr(at, length))) {
      add_pending();
      add(*id, length);
    } else if (settings_.unknown_id) {
      if (!settings_.fuse_unknown) add_pending();
      pending += length;
    }
    at += length;
  }
  add_pending();

  std::priority_queue<Candidate> queue;
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Rank* merge = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({i, merge->rank, merge->merged});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& symbol = symbols[top.position];
    if (symbol.length == 0 || symbol.next == -1) continue;
    const auto next = static_cast<std::size_t>(symbol.next);
    const Symbol right = symbols[next];
    // A candidate whose pair has changed since it was queued: the library tells them by the
    // merged id alone, and so does this.
    const Rank* current = find_merge(symbol.id, right.id);
    if (current == nullptr || current->merged != top.merged) continue;
    symbol.id = top.merged;
    symbol.length += right.length;
    symbol.next = right.next;
    symbols[next].length = 0;
    if (right.next >= 0)
      symbols[static_cast<std::size_t>(right.next)].prev =
          static_cast<std::ptrdiff_t>(top.position);
    if (symbol.prev >= 0) {
      const auto prev = static_cast<std::size_t>(symbol.prev);
      if (const Rank* merge = find_merge(symbols[prev].id, symbol.id)) {
        queue.push({prev, merge->rank, merge->merged});
      }
    }
    if (symbol.next >= 0) {
      if (const Rank* merge =
              find_merge(symbol.id, symbols[static_cast<std::size_t>(symbol.next)].id)) {
        queue.push({top.position, merge->rank, merge->merged});
      }
    }
  }
  std::vector<std::int32_t> ids;
  for (const Symbol& symbol : symbols) {
    if (symbol.length != 0) ids.push_back(symbol.id);
  }
  return ids;
}

}  // namespace shardwise::text::detail
