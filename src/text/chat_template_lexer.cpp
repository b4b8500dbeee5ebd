// jinja2's lexer for the environment transformers renders chat templates in (trim_blocks and
// lstrip_blocks on, keep_trailing_newline off): text, `{{ }}` and `{% %}` tags cut into tokens,
// `{# #}` comments dropped, with whitespace removed exactly where jinja2 removes it.

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "text/detail/chat_template_ast.hpp"
#include "text/detail/utf8.hpp"

namespace shardwise::text::detail::chat {
namespace {

// Python's "\s" (str.isspace) at text[at]: the length of the space there, or 0.
std::size_t space_at(std::string_view text, std::size_t at) {
  const std::size_t length = utf8_length(text, at);
  if (length == 0) return 0;
  return py_isspace(utf8_decode(text, at, length)) ? length : 0;
}

// The start of the run of Python whitespace that ends `text`.
std::size_t rstrip_start(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) --start;
    if (space_at(text, start) != end - start) break;
    end = start;
  }
  return end;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Piece> run() {
    while (at_ < src_.size()) lex_text_and_tag();
    return std::move(pieces_);
  }

 private:
  // Positions are asked for in increasing order (but for errors): counting the columns on
  // from the last one keeps a long single-line template linear.
  Pos pos_of(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    std::size_t from = *it;
    int column = 1;
    if (last_offset_ >= *it && last_offset_ <= offset) {
      from = last_offset_;
      column = last_column_;
    }
    for (std::size_t i = from; i < offset; ++i) {
      if ((static_cast<unsigned char>(src_[i]) & 0xc0) != 0x80) ++column;
    }
    last_offset_ = offset;
    last_column_ = column;
    return Pos{static_cast<int>(it - line_starts_.begin()) + 1, column};
  }

  [[noreturn]] void error(const std::string& message, std::size_t offset) const {
    throw SyntaxFailure{message, pos_of(offset)};
  }

  void lex_text_and_tag() {
    std::size_t tag = at_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        add_text(src_.substr(at_));
        at_ = src_.size();
        return;
      }
      const char kind = src_[tag + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    std::string text = src_.substr(at_, tag - at_);
    const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    if (sign == '-') {
      text.resize(rstrip_start(text));
    } else if (sign != '+' && kind != '{') {
      // lstrip_blocks: the spaces from the line's start to a block or comment tag go.
      const std::size_t newline = text.rfind('\n');
      const std::size_t line_start = newline == std::string::npos ? 0 : newline + 1;
      if (line_start > 0 || line_starting_) {
        std::size_t i = line_start;
        while (i < text.size() && space_at(text, i) > 0 && text[i] != '\n') {
          i += space_at(text, i);
        }
        if (i == text.size()) text.resize(line_start);
      }
    }
    add_text(std::move(text));
    at_ = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
    if (kind == '#') {
      lex_comment(tag);
    } else {
      lex_tag(tag, kind == '{' ? Piece::Type::kVariable : Piece::Type::kBlock);
    }
  }

  void add_text(std::string text) {
    if (text.empty()) return;
    Piece piece;
    piece.type = Piece::Type::kText;
    piece.text = std::move(text);
    pieces_.push_back(std::move(piece));
  }

  // After a tag's end: `-` strips the whitespace that follows, trim_blocks one newline.
  void after_end(char sign, bool block) {
    const std::size_t start = at_;
    if (sign == '-') {
      while (at_ < src_.size() && space_at(src_, at_) > 0) at_ += space_at(src_, at_);
    } else if (sign != '+' && block && at_ < src_.size() && src_[at_] == '\n') {
      ++at_;
    }
    line_starting_ = at_ > start && src_[at_ - 1] == '\n';
  }

  void lex_comment(std::size_t tag) {
    const std::size_t end = src_.find("#}", at_);
    if (end == std::string::npos) error("unterminated comment '{#'", tag);
    char sign = '\0';
    if (end > at_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    at_ = end + 2;
    after_end(sign, true);
  }

  void lex_tag(std::size_t tag, Piece::Type type) {
    Piece piece;
    piece.type = type;
    piece.pos = pos_of(tag);
    std::vector<char> open;  // brackets: a '}}' inside braces is not the tag's end
    const bool block = type == Piece::Type::kBlock;
    while (true) {
      while (at_ < src_.size() && space_at(src_, at_) > 0) at_ += space_at(src_, at_);
      if (at_ >= src_.size()) error(block ? "unterminated '{%' tag" : "unterminated '{{' tag", tag);
      if (open.empty() && end_of_tag(block, piece)) {
        pieces_.push_back(std::move(piece));
        return;
      }
      piece.tokens.push_back(lex_token(open, piece.tokens));
    }
  }

  bool end_of_tag(bool block, Piece& piece) {
    const std::string_view rest = std::string_view(src_).substr(at_);
    const std::string_view close = block ? "%}" : "}}";
    char sign = '\0';
    if (rest.substr(0, 2) == close) {
      at_ += 2;
    } else if ((rest[0] == '-' || (block && rest[0] == '+')) && rest.substr(1, 2) == close) {
      sign = rest[0];
      at_ += 3;
    } else {
      return false;
    }
    Token end;
    end.type = Token::Type::kEnd;
    end.pos = pos_of(at_ - 2);
    piece.tokens.push_back(end);
    after_end(sign, block);
    return true;
  }

  Token lex_token(std::vector<char>& open, const std::vector<Token>& before) {
    Token token;
    token.pos = pos_of(at_);
    const char c = src_[at_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      const bool after_dot = !before.empty() && before.back().type == Token::Type::kOperator &&
                             before.back().text == ".";
      lex_number(token, after_dot);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = at_;
      while (at_ < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[at_])) || src_[at_] == '_')) {
        ++at_;
      }
      token.type = Token::Type::kName;
      token.text = src_.substr(start, at_ - start);
    } else if (c == '\'' || c == '"') {
      lex_string(token);
    } else {
      lex_operator(token, open);
    }
    return token;
  }

  void lex_number(Token& token, bool after_dot) {
    const std::size_t start = at_;
    auto digits = [&] {
      while (at_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[at_])) || src_[at_] == '_')) {
        ++at_;
      }
    };
    if (src_[at_] == '0' && at_ + 1 < src_.size() &&
        std::isalpha(static_cast<unsigned char>(src_[at_ + 1])) && src_[at_ + 1] != 'e' &&
        src_[at_ + 1] != 'E') {
      error("integer literals in base 2, 8 or 16 are not implemented", start);
    }
    digits();
    bool real = false;
    if (!after_dot && at_ + 1 < src_.size() && src_[at_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[at_ + 1]))) {
      real = true;
      ++at_;
      digits();
    }
    if (!after_dot && at_ < src_.size() && (src_[at_] == 'e' || src_[at_] == 'E')) {
      std::size_t e = at_ + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
        real = true;
        at_ = e;
        digits();
      }
    }
    std::string text = src_.substr(start, at_ - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (real) {
      token.type = Token::Type::kFloat;
      token.real = std::strtod(text.c_str(), nullptr);
    } else {
      token.type = Token::Type::kInt;
      errno = 0;
      token.integer = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) error("the integer " + text + " is beyond 64 bits", start);
    }
  }

  void lex_string(Token& token) {
    const char quote = src_[at_];
    const std::size_t start = at_++;
    token.type = Token::Type::kString;
    while (true) {
      if (at_ >= src_.size()) error("unterminated string", start);
      const char c = src_[at_++];
      if (c == quote) return;
      if (c != '\\') {
        token.text += c;
        continue;
      }
      if (at_ >= src_.size()) error("unterminated string", start);
      lex_escape(token.text, start);
    }
  }

  // Python's unicode-escape, which jinja2 decodes string literals with.
  void lex_escape(std::string& out, std::size_t start) {
    const char e = src_[at_++];
    switch (e) {
      case '\n': return;
      case '\\': out += '\\'; return;
      case '\'': out += '\''; return;
      case '"': out += '"'; return;
      case 'a': out += '\a'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'v': out += '\v'; return;
      case 'x': append_utf8(out, hex_escape(2, start)); return;
      case 'u': append_utf8(out, hex_escape(4, start)); return;
      case 'U': append_utf8(out, hex_escape(8, start)); return;
      case 'N': error("the escape \\N{...} is not implemented", at_ - 2);
      default: break;
    }
    if (e >= '0' && e <= '7') {
      unsigned value = static_cast<unsigned>(e - '0');
      for (int i = 0; i < 2 && at_ < src_.size() && src_[at_] >= '0' && src_[at_] <= '7'; ++i) {
        value = value * 8 + static_cast<unsigned>(src_[at_++] - '0');
      }
      append_utf8(out, value);
      return;
    }
    out += '\\';  // Python keeps an unknown escape as it is
    out += e;
  }

  char32_t hex_escape(int digits, std::size_t start) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (at_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[at_]))) {
        error("a truncated \\x, \\u or \\U escape in a string", start);
      }
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[at_++])));
      value = value * 16 + static_cast<char32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    if (value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) {
      error("an escape of a code point UTF-8 cannot hold", start);
    }
    return value;
  }

  void lex_operator(Token& token, std::vector<char>& open) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    token.type = Token::Type::kOperator;
    const std::string_view rest = std::string_view(src_).substr(at_);
    for (const std::string_view op : kTwo) {
      if (rest.substr(0, 2) == op) {
        token.text = std::string(op);
        at_ += 2;
        return;
      }
    }
    const char c = rest[0];
    if (kOne.find(c) == std::string_view::npos) {
      error("unexpected character '" + std::string(1, c) + "'", at_);
    }
    if (c == '(' || c == '[' || c == '{') open.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    if (c == ')' || c == ']' || c == '}') {
      if (open.empty() || open.back() != c) error("unexpected '" + std::string(1, c) + "'", at_);
      open.pop_back();
    }
    token.text = std::string(1, c);
    ++at_;
  }

  std::string src_;
  std::vector<std::size_t> line_starts_;
  std::vector<Piece> pieces_;
  std::size_t at_ = 0;
  bool line_starting_ = true;
  mutable std::size_t last_offset_ = 0;
  mutable int last_column_ = 1;
};

}  // namespace

std::vector<Piece> lex_template(std::string_view source) {
  // As jinja2: "\r\n" and "\r" read as "\n", and one newline at the end is dropped.
  std::string text;
  text.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text)).run();
}

}  // namespace shardwise::text::detail::chat
