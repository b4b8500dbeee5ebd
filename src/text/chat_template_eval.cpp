// Expressions of a chat template, evaluated as jinja2 evaluates them in Python: int and float
// arithmetic with Python's floor division and modulo, `~` through str(), `and`/`or` giving
// an operand, comparisons chained, an undefined value failing where Python's Undefined fails.

#include <cmath>

#include "text/detail/chat_template_builtins.hpp"
#include "text/detail/chat_template_renderer.hpp"

namespace shardwise::text::detail::chat {
namespace {

void fail_if_undefined(const Value& v) {
  if (v.is(Kind::kUndefined)) fail(v.name);
}

std::int64_t int_of(const Value& v) { return v.is(Kind::kBool) ? v.boolean : v.integer; }
double float_of(const Value& v) {
  return v.is(Kind::kFloat) ? v.real : static_cast<double>(int_of(v));
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) +
       "'");
}

void check_overflow(bool overflow) {
  if (overflow) fail("integer arithmetic beyond 64 bits is not implemented");
}

Value repeat(const Value& seq, std::int64_t times) {
  const std::size_t n = times < 0 ? 0 : static_cast<std::size_t>(times);
  if (seq.is(Kind::kString)) {
    if (n > 0 && seq.str().size() > kMaxStringBytes / n) check_string_size(kMaxStringBytes + 1);
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += seq.str();
    return Value::of_string(std::move(out));
  }
  if (n > 0 && seq.list->size() > (std::size_t{1} << 20) / n)
    fail("a list of more than 2^20 items");
  List out;
  for (std::size_t i = 0; i < n; ++i) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::of_list(std::move(out), seq.is_tuple);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  fail_if_undefined(a);
  fail_if_undefined(b);
  const bool ints =
      (a.is(Kind::kInt) || a.is(Kind::kBool)) && (b.is(Kind::kInt) || b.is(Kind::kBool));
  const bool numbers = a.is_number() && b.is_number();
  std::int64_t r = 0;
  if (op == "+") {
    if (ints) {
      check_overflow(__builtin_add_overflow(int_of(a), int_of(b), &r));
      return Value::of_int(r);
    }
    if (numbers) return Value::of_float(float_of(a) + float_of(b));
    if (a.is(Kind::kString) && b.is(Kind::kString)) return Value::of_string(a.str() + b.str());
    if (a.is(Kind::kList) && b.is(Kind::kList) && a.is_tuple == b.is_tuple) {
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::of_list(std::move(out), a.is_tuple);
    }
  } else if (op == "-") {
    if (ints) {
      check_overflow(__builtin_sub_overflow(int_of(a), int_of(b), &r));
      return Value::of_int(r);
    }
    if (numbers) return Value::of_float(float_of(a) - float_of(b));
  } else if (op == "*") {
    if (ints) {
      check_overflow(__builtin_mul_overflow(int_of(a), int_of(b), &r));
      return Value::of_int(r);
    }
    if (numbers) return Value::of_float(float_of(a) * float_of(b));
    if ((a.is(Kind::kString) || a.is(Kind::kList)) && (b.is(Kind::kInt) || b.is(Kind::kBool)))
      return repeat(a, int_of(b));
    if ((b.is(Kind::kString) || b.is(Kind::kList)) && (a.is(Kind::kInt) || a.is(Kind::kBool)))
      return repeat(b, int_of(a));
  } else if (op == "/" || op == "//" || op == "%") {
    if (a.is(Kind::kString) && op == "%") fail("string formatting with '%' is not implemented");
    if (!numbers) unsupported(op, a, b);
    if (float_of(b) == 0.0) fail(op == "%" ? "integer modulo by zero" : "division by zero");
    if (op == "/") return Value::of_float(float_of(a) / float_of(b));
    if (ints) {
      const std::int64_t x = int_of(a);
      const std::int64_t y = int_of(b);
      if (x == INT64_MIN && y == -1) fail("integer arithmetic beyond 64 bits is not implemented");
      std::int64_t q = x / y;
      std::int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::of_int(op == "//" ? q : m);
    }
    const double x = float_of(a);
    const double y = float_of(b);
    if (op == "//") return Value::of_float(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::of_float(m);
  } else if (op == "**") {
    if (ints && int_of(b) >= 0) {
      std::int64_t result = 1;
      for (std::int64_t i = 0; i < int_of(b); ++i) {
        check_overflow(__builtin_mul_overflow(result, int_of(a), &r));
        result = r;
        if (result == 0 || result == 1) break;
      }
      return Value::of_int(result);
    }
    if (numbers) return Value::of_float(std::pow(float_of(a), float_of(b)));
  }
  unsupported(op, a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is(Kind::kString))
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : *container.list) {
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::kDict:
    case Kind::kNamespace:
      return item.is(Kind::kString) && container.dict->find(item.str()) != nullptr;
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace

Value Renderer::eval(const Expr& e) {
  try {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kList:
      case ExprKind::kTuple: {
        List items;
        for (const auto& a : e.args) items.push_back(eval(*a));
        return Value::of_list(std::move(items), e.kind == ExprKind::kTuple);
      }
      case ExprKind::kDict: {
        Dict d;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i]);
          if (!key.is(Kind::kString)) fail("dict keys other than strings are not implemented");
          d.set(key.str(), eval(*e.args[i + 1]));
        }
        return Value::of_dict(std::move(d));
      }
      case ExprKind::kAttribute: return get_attribute(eval(*e.args[0]), e.name);
      case ExprKind::kItem: return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case ExprKind::kSlice: {
        const Value object = eval(*e.args[0]);
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (e.args[static_cast<std::size_t>(i) + 1])
            bounds[i] = eval(*e.args[static_cast<std::size_t>(i) + 1]);
        }
        auto at = [&](int i) {
          return e.args[static_cast<std::size_t>(i) + 1] ? &bounds[i] : nullptr;
        };
        return get_slice(object, at(0), at(1), at(2));
      }
      case ExprKind::kCall: return eval_call(e);
      case ExprKind::kFilter: {
        const Value operand = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, operand, args);
      }
      case ExprKind::kTest: {
        const Value operand = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return Value::of_bool(apply_test(e.name, operand, args) != e.negated);
      }
      case ExprKind::kNegate:
      case ExprKind::kPlus: {
        const Value v = eval(*e.args[0]);
        fail_if_undefined(v);
        if (!v.is_number())
          fail("bad operand type for unary " +
               std::string(e.kind == ExprKind::kNegate ? "-" : "+") + ": '" + type_name(v) + "'");
        if (e.kind == ExprKind::kPlus) return v.is(Kind::kBool) ? Value::of_int(v.boolean) : v;
        if (v.is(Kind::kFloat)) return Value::of_float(-v.real);
        return arithmetic("-", Value::of_int(0), v);
      }
      case ExprKind::kNot: return Value::of_bool(!truthy(eval(*e.args[0])));
      case ExprKind::kAnd: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case ExprKind::kBinary: return eval_binary(e);
      case ExprKind::kCompare: return eval_compare(e);
      case ExprKind::kConditional:
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2])
                         : Value::undefined("the conditional expression had no else");
    }
  } catch (Failure& f) {
    if (!f.located) {
      f.located = true;
      f.line = e.pos.line;
      f.column = e.pos.column;
    }
    throw;
  }
  return {};
}

Value Renderer::eval_binary(const Expr& e) {
  const Value a = eval(*e.args[0]);
  const Value b = eval(*e.args[1]);
  if (e.name == "~") {
    std::string joined = py_str(a);
    const std::string right = py_str(b);
    check_string_size(joined.size() + right.size());
    return Value::of_string(joined + right);
  }
  return arithmetic(e.name, a, b);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (std::size_t i = 0; i < e.operators.size(); ++i) {
    const std::string& op = e.operators[i];
    Value right = eval(*e.args[i + 1]);
    bool holds = false;
    if (op == "==") {
      holds = equals(left, right);
    } else if (op == "!=") {
      holds = !equals(left, right);
    } else if (op == "in" || op == "not in") {
      holds = contains(right, left) == (op == "in");
    } else {
      fail_if_undefined(left);
      fail_if_undefined(right);
      const int c = compare(left, right);
      holds = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!holds) return Value::of_bool(false);
    left = std::move(right);
  }
  return Value::of_bool(true);
}

CallArgs Renderer::eval_args(const Expr& e, std::size_t first) {
  CallArgs args;
  for (std::size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [name, value] : e.named) args.named.emplace_back(name, eval(*value));
  return args;
}

Value Renderer::eval_call(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  CallArgs args = eval_args(e, 1);
  if (callee.is(Kind::kUndefined)) fail(callee.name);
  if (!callee.is(Kind::kFunction)) fail("'" + type_name(callee) + "' object is not callable");
  return callee.function->call(args);
}

}  // namespace shardwise::text::detail::chat
