// The statements of a chat template: if/elif/else, for (with `if` filter and `else`), set
// (names, tuples, a namespace's attribute, a block), macro, break/continue (transformers
// enables loop controls) and transformers' generation block. Any other statement is refused
// by name: rendering it as something else would change the model's input in silence.

#include <set>

#include "text/detail/chat_template_expr_parser.hpp"

namespace shardwise::text::detail::chat {
namespace {

class StatementParser {
 public:
  StatementParser(std::vector<Piece> pieces, bool& has_generation)
      : pieces_(std::move(pieces)), has_generation_(has_generation) {}

  Body parse_all() {
    std::string stop;
    Body body = parse_body({}, stop, 0);
    return body;
  }

 private:
  // Statements up to a block tag whose first name is in `stops` (left unconsumed, its name in
  // `stop`), or to the end of the template where `stops` is empty.
  Body parse_body(const std::set<std::string>& stops, std::string& stop, int depth) {
    if (depth > kMaxNesting) {
      refuse("blocks nest deeper than " + std::to_string(kMaxNesting) + " levels", here());
    }
    Body body;
    while (at_ < pieces_.size()) {
      Piece& piece = pieces_[at_];
      if (piece.type == Piece::Type::kText) {
        Node n;
        n.kind = NodeKind::kText;
        n.text = std::move(piece.text);
        body.push_back(std::move(n));
        ++at_;
        continue;
      }
      for (const Token& t : piece.tokens) {
        if (t.type == Token::Type::kName && t.text == "loop") ++loop_mentions_;
      }
      ExprParser p(piece.tokens);
      if (piece.type == Piece::Type::kVariable) {
        Node n;
        n.kind = NodeKind::kOutput;
        n.pos = piece.pos;
        n.expr = p.tuple();
        p.expect_end();
        body.push_back(std::move(n));
        ++at_;
        continue;
      }
      if (p.peek().type != Token::Type::kName) p.unexpected("a statement's name");
      const std::string name = p.peek().text;
      if (stops.count(name) > 0) {
        stop = name;
        return body;
      }
      body.push_back(statement(p, name, piece.pos, depth));
    }
    if (!stops.empty()) {
      refuse("the template ends inside a block; expected '" + *stops.begin() + "'", open_pos_);
    }
    return body;
  }

  Pos here() const { return at_ < pieces_.size() ? pieces_[at_].pos : Pos{}; }

  // Consumes the tag at the cursor after its name was read with `p`.
  void end_tag(ExprParser& p) {
    p.expect_end();
    ++at_;
  }

  // The tokens of the tag at the cursor, its statement name consumed.
  ExprParser open_tag() {
    ExprParser p(pieces_[at_].tokens);
    p.next();
    return p;
  }

  Node statement(ExprParser& p, const std::string& name, Pos pos, int depth) {
    p.next();
    Node n;
    n.pos = pos;
    open_pos_ = pos;
    if (name == "if") return if_statement(p, std::move(n), depth);
    if (name == "for") return for_statement(p, std::move(n), depth);
    if (name == "set") return set_statement(p, std::move(n), depth);
    if (name == "macro") return macro_statement(p, std::move(n), depth);
    if (name == "generation") return generation_statement(p, std::move(n), depth);
    if (name == "break" || name == "continue") {
      if (loops_ == 0) refuse("'" + name + "' outside a loop", pos);
      n.kind = name == "break" ? NodeKind::kBreak : NodeKind::kContinue;
      end_tag(p);
      return n;
    }
    static const std::set<std::string> kEnds = {"endif",         "endfor", "endset", "endmacro",
                                                "endgeneration", "elif",   "else"};
    if (kEnds.count(name) > 0) refuse("'" + name + "' without its opening block", pos);
    refuse("the statement '" + name + "' is not implemented", pos);
  }

  Node if_statement(ExprParser& p, Node n, int depth) {
    n.kind = NodeKind::kIf;
    ExprPtr condition = p.tuple(false);
    end_tag(p);
    while (true) {
      std::string stop;
      Body body = parse_body({"elif", "else", "endif"}, stop, depth + 1);
      n.branches.emplace_back(std::move(condition), std::move(body));
      ExprParser q = open_tag();
      if (stop == "endif") {
        end_tag(q);
        return n;
      }
      if (stop == "else") {
        end_tag(q);
        std::string end;
        Body rest = parse_body({"endif"}, end, depth + 1);
        n.branches.emplace_back(nullptr, std::move(rest));
        ExprParser r = open_tag();
        end_tag(r);
        return n;
      }
      condition = q.tuple(false);
      end_tag(q);
    }
  }

  std::vector<std::string> assign_targets(ExprParser& p) {
    std::vector<std::string> names;
    const bool parenthesized = p.skip_op("(");
    do {
      names.push_back(p.expect_name());
    } while (p.skip_op(",") && p.peek().type == Token::Type::kName);
    if (parenthesized) p.expect_op(")");
    return names;
  }

  Node for_statement(ExprParser& p, Node n, int depth) {
    n.kind = NodeKind::kFor;
    n.targets = assign_targets(p);
    if (!p.skip_name("in")) p.unexpected("'in'");
    n.expr = p.tuple(false);
    if (p.skip_name("if")) n.filter = p.expression();
    if (p.is_name("recursive")) refuse("recursive loops are not implemented", p.peek().pos);
    end_tag(p);
    ++loops_;
    std::string stop;
    const std::size_t mentions = loop_mentions_;
    n.body = parse_body({"else", "endfor"}, stop, depth + 1);
    n.uses_loop = loop_mentions_ != mentions;
    --loops_;
    if (stop == "else") {
      ExprParser q = open_tag();
      end_tag(q);
      n.else_body = parse_body({"endfor"}, stop, depth + 1);
    }
    ExprParser q = open_tag();
    end_tag(q);
    return n;
  }

  Node set_statement(ExprParser& p, Node n, int depth) {
    n.kind = NodeKind::kSet;
    if (p.peek().type == Token::Type::kName && p.is_op(".", 1)) {
      n.targets.push_back(p.expect_name());
      p.next();
      n.attribute = p.expect_name();
    } else {
      n.targets = assign_targets(p);
    }
    if (p.skip_op("=")) {
      n.expr = p.tuple();
      end_tag(p);
      return n;
    }
    if (p.is_op("|")) refuse("filtered set blocks are not implemented", p.peek().pos);
    if (n.targets.size() != 1 || !n.attribute.empty()) p.unexpected("'='");
    n.kind = NodeKind::kSetBlock;
    end_tag(p);
    ++captures_;
    std::string stop;
    n.body = parse_body({"endset"}, stop, depth + 1);
    --captures_;
    ExprParser q = open_tag();
    end_tag(q);
    return n;
  }

  Node macro_statement(ExprParser& p, Node n, int depth) {
    n.kind = NodeKind::kMacro;
    n.targets.push_back(p.expect_name());
    p.expect_op("(");
    while (!p.skip_op(")")) {
      if (!n.params.empty()) p.expect_op(",");
      std::string param = p.expect_name();
      ExprPtr fallback = p.skip_op("=") ? p.expression() : nullptr;
      n.params.emplace_back(std::move(param), std::move(fallback));
    }
    end_tag(p);
    const int loops = loops_;
    loops_ = 0;  // break/continue cannot reach a loop around the definition
    ++captures_;
    std::string stop;
    n.body = parse_body({"endmacro"}, stop, depth + 1);
    --captures_;
    loops_ = loops;
    ExprParser q = open_tag();
    end_tag(q);
    return n;
  }

  Node generation_statement(ExprParser& p, Node n, int depth) {
    // transformers counts a block's offset in the output yielded so far: inside a macro, a set
    // block or another generation block that count is not the block's place, so such a
    // template's ranges would be wrong in transformers too.
    if (captures_ > 0) {
      refuse("a generation block inside a macro, set block or generation block", n.pos);
    }
    n.kind = NodeKind::kGeneration;
    has_generation_ = true;
    end_tag(p);
    ++captures_;
    std::string stop;
    n.body = parse_body({"endgeneration"}, stop, depth + 1);
    --captures_;
    ExprParser q = open_tag();
    end_tag(q);
    return n;
  }

  std::vector<Piece> pieces_;
  bool& has_generation_;
  std::size_t at_ = 0;
  int loops_ = 0;
  int captures_ = 0;
  std::size_t loop_mentions_ = 0;
  Pos open_pos_;
};

}  // namespace

Body parse_template(std::vector<Piece> pieces, bool& has_generation) {
  has_generation = false;
  return StatementParser(std::move(pieces), has_generation).parse_all();
}

}  // namespace shardwise::text::detail::chat
