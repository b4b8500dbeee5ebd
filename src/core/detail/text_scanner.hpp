#pragma once
// A tiny cursor over text for the parsers of shapes, meshes and partition specs. Errors
// quote the whole text and the column where parsing stopped.

#include <cstdint>
#include <string>
#include <string_view>

namespace shardwise::detail {

class TextScanner {
 public:
  // `what` names the kind of text in error messages ("partition spec", "mesh").
  TextScanner(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  void skip_space();
  [[nodiscard]] bool at_end() const { return pos_ >= text_.size(); }
  // The next character, or '\0' at the end.
  [[nodiscard]] char peek() const { return at_end() ? '\0' : text_[pos_]; }
  [[nodiscard]] std::size_t position() const { return pos_; }
  // Moves back to a position returned by position().
  void rewind(std::size_t position) { pos_ = position; }

  // Consumes `c` if it is next; returns whether it did.
  bool consume(char c);
  // Consumes `word` if the text continues with it and no identifier character follows.
  bool consume_word(std::string_view word);
  // Consumes `c` or throws naming what was found instead.
  void expect(char c);
  // Throws unless only white space is left.
  void expect_end();

  [[nodiscard]] bool at_identifier() const;
  // [A-Za-z_][A-Za-z0-9_]*
  std::string identifier(std::string_view expected);
  // 'text' or "text"; no escapes.
  std::string quoted(std::string_view expected);
  // An optionally signed decimal integer.
  std::int64_t integer(std::string_view expected);

  [[noreturn]] void fail(const std::string& message) const;

 private:
  [[nodiscard]] std::string found() const;

  std::string_view text_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

// True for names shardwise accepts as mesh axis names: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view name);

}  // namespace shardwise::detail
