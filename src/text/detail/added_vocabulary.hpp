#pragma once
// Added tokens (special or not): the text is split on them before anything else, as the
// library's AddedVocabulary splits it. Tokens with normalized=false are found first, over the
// whole text (split_raw); each piece between them is then normalized, and the tokens with
// normalized=true are found in the normalized piece (split_normalized), spelt as the normalizer
// makes their contents. In each pass the leftmost match wins, the longest at one place;
// single_word drops a match inside a word, lstrip and rstrip widen one over the spaces beside it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "string_hash.hpp"

namespace shardwise::text::detail {

struct AddedToken {
  std::string content;
  // What the token is found as: its content, normalized where `normalized` (the reader sets it).
  std::string pattern;
  std::int32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

struct Segment {
  std::string_view text;
  std::optional<std::int32_t> added_id;  // the added token it is, or text for the model
};

class AddedVocabulary {
 public:
  // Tokens with distinct, non-empty contents and patterns; in one pass, no token's pattern starts
  // with a space where another has rstrip (the library's splits would then overlap: the reader
  // refuses that).
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // `text` in segments, in order, none empty: split on the tokens of one pass (the second into
  // `out`, cleared first: a vector reused for every piece).
  [[nodiscard]] std::vector<Segment> split_raw(std::string_view text) const;
  void split_normalized(std::string_view text, std::vector<Segment>& out) const;

  [[nodiscard]] const std::vector<AddedToken>& tokens() const { return tokens_; }
  [[nodiscard]] const AddedToken* find_id(std::int32_t id) const;
  [[nodiscard]] const AddedToken* find_content(std::string_view content) const;

 private:
  // The tokens of one pass as a trie over their bytes.
  class Matcher {
   public:
    void add(std::string_view content, std::size_t token);
    // The longest token starting at text[at]: (token index, length), or length 0.
    [[nodiscard]] std::pair<std::size_t, std::size_t> longest_at(std::string_view text,
                                                                 std::size_t at) const;
    [[nodiscard]] bool empty() const { return nodes_.size() == 1; }
    // Where the next token may start, from `at` on: a byte some token starts with (text.size()
    // where none is left). Most of a text is passed over here, a byte at a time.
    [[nodiscard]] std::size_t next_start(std::string_view text, std::size_t at) const {
      while (at < text.size() && !first_bytes_[static_cast<unsigned char>(text[at])]) ++at;
      return at;
    }

   private:
    struct Node {
      std::vector<std::pair<unsigned char, std::size_t>> children;  // sorted by byte
      std::optional<std::size_t> token;
    };
    std::vector<Node> nodes_{Node{}};
    std::array<bool, 256> first_bytes_{};
  };
  void split_pass(const Matcher& matcher, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  StringMap<std::size_t> by_content_;
  Matcher raw_;         // normalized=false
  Matcher normalized_;  // normalized=true
};

}  // namespace shardwise::text::detail
