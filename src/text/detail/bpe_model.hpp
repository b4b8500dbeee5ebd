#pragma once
// The BPE model: a vocabulary, ranked merges, and each pre-tokenized piece merged as the
// library merges it (bpe_merge.hpp), with a cache of words already merged.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bpe_merge.hpp"
#include "string_hash.hpp"

namespace shardwise::text::detail {

struct Merge {
  std::int32_t left;
  std::int32_t right;
  std::int32_t merged;  // the id of left's token followed by right's
};

struct BpeSettings {
  // A piece that is a token of the vocabulary is that token, whatever the merges make of it.
  bool ignore_merges = false;
  // A character the vocabulary lacks becomes the tokens <0xNN> of its UTF-8 bytes, where the
  // vocabulary holds all of them.
  bool byte_fallback = false;
  // The id a character the vocabulary lacks (and byte fallback does not spell) becomes; without
  // one, such characters are dropped.
  std::optional<std::int32_t> unknown_id;
  bool fuse_unknown = false;  // consecutive unknown characters become one unknown id
};

class BpeModel {
 public:
  // `tokens` holds each id's token; `merges` in rank order (a pair given twice keeps its later
  // rank, as the library's map of merges does).
  BpeModel(std::vector<std::string> tokens, const std::vector<Merge>& merges, BpeSettings settings);
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

  // Appends the ids of one pre-tokenized piece (in the vocabulary's spelling). InvalidArgument
  // for a piece of 4 GiB or more.
  void tokenize(std::string_view piece, std::vector<std::int32_t>& out) const;

  [[nodiscard]] std::size_t size() const { return tokens_.size(); }
  [[nodiscard]] const BpeSettings& settings() const { return settings_; }
  [[nodiscard]] std::optional<std::int32_t> token_to_id(std::string_view token) const;
  [[nodiscard]] const std::string& token(std::int32_t id) const {
    return tokens_[static_cast<std::size_t>(id)];
  }

 private:
  [[nodiscard]] std::vector<std::int32_t> merge_word(std::string_view word) const;

  std::vector<std::string> tokens_;
  StringMap<std::int32_t> ids_;
  MergeRanks ranks_;
  std::array<std::int32_t, 256> byte_ids_{};  // the id of <0xNN>, -1 where none
  BpeSettings settings_;
  class WordCache;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace shardwise::text::detail
