#pragma once
// The expression parser of the chat template engine (chat_template_expr_parser.cpp), over the
// tokens of one tag; the statement parser (chat_template_parser.cpp) drives it.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/detail/chat_template_ast.hpp"

namespace shardwise::text::detail::chat {

[[noreturn]] void refuse(const std::string& message, Pos pos);
ExprPtr make_expr(ExprKind kind, Pos pos);

class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  const Token& peek(std::size_t ahead = 0) const;
  const Token& next();
  bool is_op(std::string_view op, std::size_t ahead = 0) const;
  bool is_name(std::string_view name, std::size_t ahead = 0) const;
  bool at_end() const { return peek().type == Token::Type::kEnd; }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  [[noreturn]] void unexpected(const std::string& expected) const;
  void expect_op(std::string_view op);
  std::string expect_name();
  void expect_end();
  // An expression, or several separated by commas (a tuple without parentheses).
  ExprPtr tuple(bool conditional = true);
  ExprPtr expression();
  template <typename F>
  ExprPtr logical(std::string_view word, ExprKind kind, F operand) {
    ExprPtr e = operand();
    while (is_name(word)) {
      ExprPtr b = make_expr(kind, next().pos);
      b->args.push_back(std::move(e));
      b->args.push_back(operand());
      e = std::move(b);
    }
    return e;
  }
  ExprPtr or_expr() {
    return logical("or", ExprKind::kOr, [this] { return and_expr(); });
  }
  ExprPtr and_expr() {
    return logical("and", ExprKind::kAnd, [this] { return not_expr(); });
  }
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr binary_chain(std::initializer_list<std::string_view> ops,
                       ExprPtr (ExprParser::*operand)());
  ExprPtr arithmetic() { return binary_chain({"+", "-"}, &ExprParser::concat); }
  ExprPtr concat() { return binary_chain({"~"}, &ExprParser::product); }
  ExprPtr product() { return binary_chain({"*", "/", "//", "%"}, &ExprParser::power); }
  ExprPtr power() { return binary_chain({"**"}, &ExprParser::unary_with_filters); }
  ExprPtr unary_with_filters() { return unary(true); }
  ExprPtr unary(bool with_filters);
  ExprPtr literal(Value v, Pos pos);
  ExprPtr primary();
  ExprPtr postfix(ExprPtr e);
  ExprPtr subscript(ExprPtr object, Pos pos);
  // Arguments in parentheses: positional ones, then name=value ones.
  void arguments(Expr& e);
  ExprPtr call(ExprPtr callee);
  ExprPtr filters(ExprPtr e);

 private:
  struct Deeper {
    explicit Deeper(ExprParser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) {
        refuse("expressions nest deeper than " + std::to_string(kMaxNesting) + " levels",
               parser.peek().pos);
      }
    }
    ~Deeper() { --parser.depth_; }
    Deeper(const Deeper&) = delete;
    Deeper& operator=(const Deeper&) = delete;
    ExprParser& parser;
  };

  const std::vector<Token>& tokens_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace shardwise::text::detail::chat
