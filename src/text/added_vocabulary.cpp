#include "detail/added_vocabulary.hpp"

#include <algorithm>
#include <utility>

#include "detail/unicode_classes.hpp"
#include "detail/utf8.hpp"

namespace shardwise::text::detail {
namespace {

bool is_continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xc0) == 0x80; }

// The code point ending at text[end - 1] (end > 0; text is UTF-8).
char32_t code_point_before(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && is_continuation(text[start])) --start;
  return utf8_decode(text, start, end - start);
}

char32_t code_point_at(std::string_view text, std::size_t at) {
  return utf8_decode(text, at, utf8_length(text, at));
}

// Where the spaces that end text[0, end) begin (the regex crate's \s*$).
std::size_t trailing_spaces_start(std::string_view text, std::size_t end) {
  while (end > 0 && is_added_token_space(code_point_before(text, end))) {
    --end;
    while (end > 0 && is_continuation(text[end])) --end;
  }
  return end;
}

// Where the spaces that start text[at, end) end (^\s*).
std::size_t leading_spaces_end(std::string_view text, std::size_t at) {
  while (at < text.size()) {
    const std::size_t length = utf8_length(text, at);
    if (!is_added_token_space(utf8_decode(text, at, length))) break;
    at += length;
  }
  return at;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view content, std::size_t token) {
  first_bytes_[static_cast<unsigned char>(content.front())] = true;
  std::size_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), byte,
                               [](const auto& child, unsigned char b) { return child.first < b; });
    if (it != children.end() && it->first == byte) {
      node = it->second;
      continue;
    }
    node = nodes_.size();
    children.insert(it, {byte, node});
    nodes_.emplace_back();  // may move `children`, which is not used again
  }
  nodes_[node].token = token;
}

std::pair<std::size_t, std::size_t> AddedVocabulary::Matcher::longest_at(std::string_view text,
                                                                         std::size_t at) const {
  std::pair<std::size_t, std::size_t> best{0, 0};
  std::size_t node = 0;
  for (std::size_t i = at; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    const auto it =
        std::lower_bound(children.begin(), children.end(), byte,
                         [](const auto& child, unsigned char b) { return child.first < b; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].token) best = {*nodes_[node].token, i + 1 - at};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    (tokens_[i].normalized ? normalized_ : raw_).add(tokens_[i].pattern, i);
    by_id_.emplace(tokens_[i].id, i);
    by_content_.emplace(tokens_[i].content, i);
  }
}

const AddedToken* AddedVocabulary::find_id(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find_content(std::string_view content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::split_pass(const Matcher& matcher, std::string_view text,
                                 std::vector<Segment>& out) const {
  std::size_t kept_up_to = 0;  // the end of the last segment written
  std::size_t at = 0;
  while (!matcher.empty()) {
    at = matcher.next_start(text, at);
    if (at == text.size()) break;
    const auto [index, length] = matcher.longest_at(text, at);
    if (length == 0) {
      ++at;  // a token starts with a lead byte, never inside a character
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t start = at;
    std::size_t stop = at + length;
    at = stop;  // the search goes on after a match, kept or dropped
    if (token.single_word) {
      const bool word_before =
          start > 0 && is_added_token_word_character(code_point_before(text, start));
      const bool word_after =
          stop < text.size() && is_added_token_word_character(code_point_at(text, stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(trailing_spaces_start(text, start), kept_up_to);
    if (token.rstrip) stop = leading_spaces_end(text, stop);
    if (kept_up_to < start) out.push_back({text.substr(kept_up_to, start - kept_up_to), {}});
    out.push_back({text.substr(start, stop - start), token.id});
    kept_up_to = stop;
  }
  if (kept_up_to < text.size()) out.push_back({text.substr(kept_up_to), {}});
}

std::vector<Segment> AddedVocabulary::split_raw(std::string_view text) const {
  std::vector<Segment> out;
  split_pass(raw_, text, out);
  return out;
}

void AddedVocabulary::split_normalized(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  split_pass(normalized_, text, out);
}

}  // namespace shardwise::text::detail
