// jinja2's parser for the statements and expressions chat templates use, with jinja2's
// precedence: conditional < or < and < not < comparison < + - < ~ < * / // % < ** < unary <
// postfix (. [] ()) and filters/tests. Whatever else a template holds is refused by name.

#include <set>

#include "text/detail/chat_template_expr_parser.hpp"

namespace shardwise::text::detail::chat {

void refuse(const std::string& message, Pos pos) { throw SyntaxFailure{message, pos}; }

ExprPtr make_expr(ExprKind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

const Token& ExprParser::peek(std::size_t ahead) const {
  return tokens_[std::min(i_ + ahead, tokens_.size() - 1)];
}

const Token& ExprParser::next() {
  const Token& t = peek();
  if (i_ + 1 < tokens_.size()) ++i_;
  return t;
}

bool ExprParser::is_op(std::string_view op, std::size_t ahead) const {
  return peek(ahead).type == Token::Type::kOperator && peek(ahead).text == op;
}

bool ExprParser::is_name(std::string_view name, std::size_t ahead) const {
  return peek(ahead).type == Token::Type::kName && peek(ahead).text == name;
}

bool ExprParser::skip_op(std::string_view op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool ExprParser::skip_name(std::string_view name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

[[noreturn]] void ExprParser::unexpected(const std::string& expected) const {
  const Token& t = peek();
  const std::string got = t.type == Token::Type::kEnd      ? "the end of the tag"
                          : t.type == Token::Type::kString ? "a string"
                                                           : "'" + t.text + "'";
  refuse("expected " + expected + ", got " + got, t.pos);
}

void ExprParser::expect_op(std::string_view op) {
  if (!skip_op(op)) unexpected("'" + std::string(op) + "'");
}

std::string ExprParser::expect_name() {
  if (peek().type != Token::Type::kName) unexpected("a name");
  return next().text;
}

void ExprParser::expect_end() {
  if (!at_end()) unexpected("the end of the tag");
}

ExprPtr ExprParser::tuple(bool conditional) {
  const Pos pos = peek().pos;
  ExprPtr first = conditional ? expression() : or_expr();
  if (!is_op(",")) return first;
  ExprPtr t = make_expr(ExprKind::kTuple, pos);
  t->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (at_end() || is_op(")") || is_op("=") || is_name("in") || is_name("if")) break;
    t->args.push_back(conditional ? expression() : or_expr());
  }
  return t;
}

ExprPtr ExprParser::expression() {
  Deeper deeper(*this);
  ExprPtr e = or_expr();
  while (is_name("if")) {
    const Pos pos = next().pos;
    ExprPtr c = make_expr(ExprKind::kConditional, pos);
    c->args.push_back(std::move(e));
    c->args.push_back(or_expr());
    c->args.push_back(skip_name("else") ? expression() : nullptr);
    e = std::move(c);
  }
  return e;
}

ExprPtr ExprParser::not_expr() {
  if (is_name("not")) {
    Deeper deeper(*this);
    ExprPtr n = make_expr(ExprKind::kNot, next().pos);
    n->args.push_back(not_expr());
    return n;
  }
  return compare();
}

ExprPtr ExprParser::compare() {
  ExprPtr first = arithmetic();
  ExprPtr c;
  while (true) {
    std::string op;
    const Pos pos = peek().pos;
    static const std::set<std::string> kOps = {"==", "!=", "<", ">", "<=", ">="};
    if (peek().type == Token::Type::kOperator && kOps.count(peek().text) > 0) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    if (!c) {
      c = make_expr(ExprKind::kCompare, pos);
      c->args.push_back(std::move(first));
    }
    c->operators.push_back(op);
    c->args.push_back(arithmetic());
  }
  return c ? std::move(c) : std::move(first);
}

ExprPtr ExprParser::binary_chain(std::initializer_list<std::string_view> ops,
                                 ExprPtr (ExprParser::*operand)()) {
  ExprPtr e = (this->*operand)();
  while (true) {
    bool matched = false;
    for (const std::string_view op : ops) {
      if (!is_op(op)) continue;
      ExprPtr b = make_expr(ExprKind::kBinary, next().pos);
      b->name = std::string(op);
      b->args.push_back(std::move(e));
      b->args.push_back((this->*operand)());
      e = std::move(b);
      matched = true;
      break;
    }
    if (!matched) return e;
  }
}

ExprPtr ExprParser::unary(bool with_filters) {
  Deeper deeper(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const bool minus = is_op("-");
    e = make_expr(minus ? ExprKind::kNegate : ExprKind::kPlus, next().pos);
    e->args.push_back(unary(false));
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  return with_filters ? filters(std::move(e)) : std::move(e);
}

ExprPtr ExprParser::literal(Value v, Pos pos) {
  ExprPtr e = make_expr(ExprKind::kLiteral, pos);
  e->literal = std::move(v);
  return e;
}

ExprPtr ExprParser::primary() {
  const Token& t = peek();
  const Pos pos = t.pos;
  switch (t.type) {
    case Token::Type::kName: {
      const std::string name = next().text;
      if (name == "true" || name == "True") return literal(Value::of_bool(true), pos);
      if (name == "false" || name == "False") return literal(Value::of_bool(false), pos);
      if (name == "none" || name == "None") return literal(Value::none(), pos);
      ExprPtr e = make_expr(ExprKind::kName, pos);
      e->name = name;
      return e;
    }
    case Token::Type::kString: {
      std::string text = next().text;
      while (peek().type == Token::Type::kString) text += next().text;
      return literal(Value::of_string(std::move(text)), pos);
    }
    case Token::Type::kInt: return literal(Value::of_int(next().integer), pos);
    case Token::Type::kFloat: return literal(Value::of_float(next().real), pos);
    default: break;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return make_expr(ExprKind::kTuple, pos);
    ExprPtr e = expression();
    if (is_op(",")) {
      ExprPtr items = make_expr(ExprKind::kTuple, pos);
      items->args.push_back(std::move(e));
      while (skip_op(",") && !is_op(")")) items->args.push_back(expression());
      e = std::move(items);
    }
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    ExprPtr list = make_expr(ExprKind::kList, pos);
    while (!skip_op("]")) {
      if (!list->args.empty()) expect_op(",");
      if (skip_op("]")) break;
      list->args.push_back(expression());
    }
    return list;
  }
  if (skip_op("{")) {
    ExprPtr dict = make_expr(ExprKind::kDict, pos);
    while (!skip_op("}")) {
      if (!dict->args.empty()) expect_op(",");
      if (skip_op("}")) break;
      dict->args.push_back(expression());
      expect_op(":");
      dict->args.push_back(expression());
    }
    return dict;
  }
  unexpected("an expression");
}

ExprPtr ExprParser::postfix(ExprPtr e) {
  while (true) {
    const Pos pos = peek().pos;
    if (skip_op(".")) {
      if (peek().type == Token::Type::kInt) {
        ExprPtr item = make_expr(ExprKind::kItem, pos);
        item->args.push_back(std::move(e));
        item->args.push_back(literal(Value::of_int(next().integer), pos));
        e = std::move(item);
        continue;
      }
      ExprPtr a = make_expr(ExprKind::kAttribute, pos);
      a->name = expect_name();
      a->args.push_back(std::move(e));
      e = std::move(a);
    } else if (skip_op("[")) {
      e = subscript(std::move(e), pos);
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExprParser::subscript(ExprPtr object, Pos pos) {
  ExprPtr bounds[3];
  bool slice = false;
  for (int part = 0; part < 3; ++part) {
    if (!is_op(":") && !is_op("]")) bounds[part] = expression();
    if (part < 2 && skip_op(":")) {
      slice = true;
    } else {
      break;
    }
  }
  if (is_op(",")) refuse("subscripts with several indexes are not implemented", peek().pos);
  expect_op("]");
  ExprPtr e = make_expr(slice ? ExprKind::kSlice : ExprKind::kItem, pos);
  e->args.push_back(std::move(object));
  if (!slice) {
    e->args.push_back(std::move(bounds[0]));
  } else {
    for (auto& b : bounds) e->args.push_back(std::move(b));
  }
  return e;
}

void ExprParser::arguments(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!skip_op(")")) {
    if (!first) {
      expect_op(",");
      if (skip_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) refuse("*args and **kwargs are not implemented", peek().pos);
    if (peek().type == Token::Type::kName && is_op("=", 1)) {
      std::string name = next().text;
      next();
      e.named.emplace_back(std::move(name), expression());
    } else {
      if (!e.named.empty()) refuse("a positional argument after a keyword argument", peek().pos);
      e.args.push_back(expression());
    }
  }
}

ExprPtr ExprParser::call(ExprPtr callee) {
  ExprPtr c = make_expr(ExprKind::kCall, callee->pos);
  c->args.push_back(std::move(callee));
  arguments(*c);
  return c;
}

ExprPtr ExprParser::filters(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      next();
      ExprPtr f = make_expr(ExprKind::kFilter, peek().pos);
      f->name = expect_name();
      if (is_op(".")) refuse("dotted filter names are not implemented", peek().pos);
      f->args.push_back(std::move(e));
      if (is_op("(")) arguments(*f);
      e = std::move(f);
    } else if (is_name("is")) {
      next();
      ExprPtr t = make_expr(ExprKind::kTest, peek().pos);
      t->negated = skip_name("not");
      t->name = expect_name();
      t->args.push_back(std::move(e));
      const Token& n = peek();
      const bool value_follows =
          n.type == Token::Type::kString || n.type == Token::Type::kInt ||
          n.type == Token::Type::kFloat || is_op("[") || is_op("{") ||
          (n.type == Token::Type::kName && n.text != "else" && n.text != "or" && n.text != "and");
      if (is_op("(")) {
        arguments(*t);
      } else if (value_follows) {
        if (is_name("is")) refuse("tests cannot be chained with 'is'", n.pos);
        t->args.push_back(postfix(primary()));
      }
      e = std::move(t);
    } else if (is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}
}  // namespace shardwise::text::detail::chat
