#include "detail/text_scanner.hpp"

#include <cctype>
#include <charconv>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

bool is_identifier_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

bool is_identifier(std::string_view name) {
  if (name.empty() || !is_identifier_start(name.front())) return false;
  for (char c : name) {
    if (!is_identifier_char(c)) return false;
  }
  return true;
}

void TextScanner::skip_space() {
  while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
}

bool TextScanner::consume(char c) {
  if (peek() != c || at_end()) return false;
  ++pos_;
  return true;
}

bool TextScanner::consume_word(std::string_view word) {
  if (text_.substr(pos_, word.size()) != word) return false;
  std::size_t end = pos_ + word.size();
  if (end < text_.size() && is_identifier_char(text_[end])) return false;
  pos_ = end;
  return true;
}

void TextScanner::expect(char c) {
  if (!consume(c)) fail(std::string("expected '") + c + "' but found " + found());
}

void TextScanner::expect_end() {
  skip_space();
  if (!at_end()) fail("unexpected " + found());
}

bool TextScanner::at_identifier() const { return !at_end() && is_identifier_start(peek()); }

std::string TextScanner::identifier(std::string_view expected) {
  if (!at_identifier()) fail("expected " + std::string(expected) + " but found " + found());
  std::size_t start = pos_;
  while (!at_end() && is_identifier_char(text_[pos_])) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

std::string TextScanner::quoted(std::string_view expected) {
  char quote = peek();
  if (quote != '\'' && quote != '"') {
    fail("expected " + std::string(expected) + " but found " + found());
  }
  std::size_t start = ++pos_;
  std::size_t end = text_.find(quote, start);
  if (end == std::string_view::npos)
    fail(std::string("unterminated string starting with ") + quote);
  pos_ = end + 1;
  return std::string(text_.substr(start, end - start));
}

std::int64_t TextScanner::integer(std::string_view expected) {
  std::size_t start = pos_;
  if (peek() == '-' || peek() == '+') ++pos_;
  while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
  const std::size_t pos_end = pos_;
  std::string_view digits = text_.substr(start, pos_ - start);
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size()) {
    pos_ = start;
    if (error == std::errc::result_out_of_range) {
      fail("integer out of range: '" + echo_input(text_.substr(start, pos_end - start)) +
           "' does not fit in 64 bits");
    }
    fail("expected " + std::string(expected) + " but found " + found());
  }
  return value;
}

void TextScanner::fail(const std::string& message) const {
  throw ParseError("cannot parse " + std::string(what_) + " '" + echo_input(text_) +
                   "': " + message + " at column " + std::to_string(pos_ + 1));
}

std::string TextScanner::found() const {
  if (at_end()) return "the end of the text";
  std::size_t end = pos_;
  while (end < text_.size() && end - pos_ < 12 &&
         std::isspace(static_cast<unsigned char>(text_[end])) == 0) {
    ++end;
  }
  if (end == pos_) end = pos_ + 1;
  std::string quoted_text(1, '\'');
  quoted_text.append(echo_input(text_.substr(pos_, end - pos_)));
  quoted_text.push_back('\'');
  return quoted_text;
}

}  // namespace shardwise::detail
