#include "detail/bpe_model.hpp"

#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

#include "detail/bpe_merge.hpp"
#include "detail/utf8.hpp"
#include "shardwise/core/error.hpp"

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
    if (word.size() >= kLongestWord) return false;  // never kept: not worth hashing
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

BpeModel::BpeModel(std::vector<std::string> tokens, const std::vector<Merge>& merges,
                   BpeSettings settings)
    : tokens_(std::move(tokens)), settings_(settings), cache_(std::make_unique<WordCache>()) {
  ids_.reserve(tokens_.size());
  for (std::size_t id = 0; id < tokens_.size(); ++id) {
    ids_.emplace(tokens_[id], static_cast<std::int32_t>(id));
  }
  byte_ids_.fill(-1);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    if (const auto id = token_to_id(name)) byte_ids_[static_cast<std::size_t>(byte)] = *id;
  }
  ranks_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& merge = merges[rank];
    ranks_.insert_or_assign(pair_key(merge.left, merge.right),
                            MergeRank{static_cast<std::uint32_t>(rank), merge.merged});
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
  if (word.size() >= kNoSymbol) {
    throw InvalidArgument("a piece of " + std::to_string(word.size()) +
                          " bytes to merge: pieces of 4 GiB or more are not encoded");
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](std::int32_t id, std::size_t length) {
    const auto index = static_cast<std::uint32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back(
        {id, index == 0 ? kNoSymbol : index - 1, kNoSymbol, static_cast<std::uint32_t>(length)});
  };
  // Each character a symbol. One the vocabulary lacks becomes its bytes' <0xNN> tokens (byte
  // fallback, where the vocabulary holds them all), else the unknown id (fused with the unknown
  // before it where fuse_unknown), else nothing. `pending` bytes of unknown characters wait for
  // the next known character; byte tokens do not end the wait: the library adds the unknown id
  // after them.
  const auto spelt_in_bytes = [&](std::string_view character) {
    for (const char byte : character) {
      if (byte_ids_[static_cast<unsigned char>(byte)] < 0) return false;
    }
    return true;
  };
  std::size_t pending = 0;
  const auto add_pending = [&] {
    if (pending != 0) add(*settings_.unknown_id, pending);
    pending = 0;
  };
  for (std::size_t at = 0; at < word.size();) {
    const std::size_t length = utf8_length(word, at);
    const std::string_view character = word.substr(at, length);
    at += length;
    if (const auto id = token_to_id(character)) {
      add_pending();
      add(*id, length);
    } else if (settings_.byte_fallback && spelt_in_bytes(character)) {
      for (const char byte : character) add(byte_ids_[static_cast<unsigned char>(byte)], 1);
    } else if (settings_.unknown_id) {
      if (!settings_.fuse_unknown) add_pending();
      pending += length;
    }
  }
  add_pending();
  merge_symbols(symbols, ranks_);
  std::vector<std::int32_t> ids;
  for (const Symbol& symbol : symbols) {
    if (symbol.length != 0) ids.push_back(symbol.id);
  }
  return ids;
}

}  // namespace shardwise::text::detail
