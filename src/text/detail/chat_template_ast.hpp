#pragma once
// A chat template's text as jinja2 reads it: the lexer's pieces (text, and the tokens of each
// `{{ }}` and `{% %}` tag, whitespace control applied), and the parser's tree of statements
// and expressions that the renderer walks.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/detail/chat_template_value.hpp"

namespace shardwise::text::detail::chat {

struct Pos {
  int line = 1;
  int column = 1;
};

// A malformed or unimplemented template, found while reading it.
struct SyntaxFailure {
  std::string message;
  Pos pos;
};

// The deepest nesting of blocks or expressions a template may have (published templates nest
// a handful deep; the bound keeps the recursive parser and renderer off the stack's end).
inline constexpr int kMaxNesting = 200;

struct Token {
  enum class Type { kName, kString, kInt, kFloat, kOperator, kEnd };
  Type type = Type::kEnd;
  std::string text;  // the name, the operator, or the string's value
  std::int64_t integer = 0;
  double real = 0;
  Pos pos;
};

struct Piece {
  enum class Type { kText, kVariable, kBlock };
  Type type = Type::kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // a tag's tokens, ending in a kEnd token
  Pos pos;
};

// The template's pieces: newlines normalized, one trailing newline dropped, comments removed,
// `-`, trim_blocks and lstrip_blocks applied as jinja2's lexer applies them.
[[nodiscard]] std::vector<Piece> lex_template(std::string_view source);

enum class ExprKind {
  kLiteral,
  kName,
  kList,
  kTuple,
  kDict,
  kAttribute,
  kItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNegate,
  kPlus,
  kNot,
  kBinary,
  kAnd,
  kOr,
  kCompare,
  kConditional,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  Pos pos;
  Value literal;
  std::string name;           // variable, attribute, filter, test or binary operator
  std::vector<ExprPtr> args;  // operands first; a slice's absent bounds are null
  std::vector<std::pair<std::string, ExprPtr>> named;  // keyword arguments of calls
  std::vector<std::string> operators;                  // of a chained comparison
  bool negated = false;                                // `is not`
};

enum class NodeKind {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kGeneration,
  kBreak,
  kContinue,
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  NodeKind kind = NodeKind::kText;
  Pos pos;
  std::string text;                                // kText
  ExprPtr expr;                                    // printed, assigned, or iterated
  std::vector<std::pair<ExprPtr, Body>> branches;  // if/elif (an else has no condition)
  std::vector<std::string> targets;                // loop or assignment names; macro name
  std::string attribute;                           // `set ns.attribute = ...`
  ExprPtr filter;                                  // `for x in y if filter`
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // a macro's, with defaults or null
  bool uses_loop = false;  // a for whose body names `loop` (else its variables are not made)
};

// The statements of a template; SyntaxFailure where it is malformed or not implemented.
[[nodiscard]] Body parse_template(std::vector<Piece> pieces, bool& has_generation);

}  // namespace shardwise::text::detail::chat
