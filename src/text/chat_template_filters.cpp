// jinja2's filters and tests as chat templates use them, with transformers' tojson
// (json.dumps with ensure_ascii=False, no HTML escaping). Autoescaping is off in that
// environment, so `safe` changes nothing and `escape` is the one filter that escapes.

#include <algorithm>
#include <cmath>
#include <set>

#include "text/detail/chat_template_builtins.hpp"

namespace shardwise::text::detail::chat {
namespace {

const std::set<std::string, std::less<>> kFilters = {
    "trim",    "length", "count",   "tojson", "upper",      "lower",      "capitalize",
    "title",   "first",  "last",    "join",   "default",    "d",          "string",
    "int",     "float",  "list",    "items",  "selectattr", "rejectattr", "select",
    "reject",  "map",    "replace", "safe",   "e",          "escape",     "abs",
    "reverse", "unique", "sum",     "min",    "max",        "wordcount"};

const std::set<std::string, std::less<>> kTests = {
    "defined",  "undefined", "none",        "string",  "mapping", "iterable", "number",
    "sequence", "true",      "false",       "boolean", "integer", "float",    "callable",
    "equalto",  "eq",        "==",          "ne",      "!=",      "lt",       "<",
    "le",       "<=",        "gt",          ">",       "ge",      ">=",       "in",
    "odd",      "even",      "divisibleby", "sameas",  "lower",   "upper"};

std::string text_of(const Value& v) { return py_str(v); }

// jinja2's do_title: each word (after '-', whitespace or an opening bracket) capitalized.
std::string jinja_title(const std::string& text) {
  std::string out = ascii_case(text, false, "title");
  bool word_start = true;
  for (char& c : out) {
    if (word_start && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    const auto u = static_cast<unsigned char>(c);
    word_start =
        c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || (u < 0x80 && py_isspace(u));
  }
  return out;
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? dot : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = digits ? get_item(v, Value::of_int(std::stoll(part))) : get_item(v, Value::of_string(part));
    if (dot == std::string::npos) return v;
    from = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: the items for which the test (or truthiness) holds.
Value select_items(const Value& operand, CallArgs& a, bool by_attribute, bool keep) {
  std::size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    const std::optional<Value> name = a.get(next++, "attribute");
    if (!name || !name->is(Kind::kString)) fail("selectattr needs an attribute name");
    attribute = name->str();
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (next < a.positional.size()) {
    test = text_of(a.positional[next++]);
    test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(next),
                                a.positional.end());
  }
  List out;
  for (const Value& item : iterate(operand)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool holds = test ? apply_test(*test, subject, test_args) : truthy(subject);
    if (holds == keep) out.push_back(item);
  }
  return Value::of_list(std::move(out));
}

Value map_items(const Value& operand, CallArgs& a) {
  List out;
  if (const std::optional<Value> attribute = a.get(99, "attribute")) {
    const std::optional<Value> fallback = a.get(99, "default");
    for (const Value& item : iterate(operand)) {
      Value v = attribute_path(item, text_of(*attribute));
      if (v.is(Kind::kUndefined) && fallback) v = *fallback;
      out.push_back(v);
    }
    return Value::of_list(std::move(out));
  }
  if (a.positional.empty()) fail("map() needs a filter name or attribute=");
  const std::string filter = text_of(a.positional[0]);
  if (!is_known_filter(filter)) fail("map's filter '" + filter + "' is not implemented");
  for (const Value& item : iterate(operand)) {
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.named = a.named;
    out.push_back(apply_filter(filter, item, rest));
  }
  return Value::of_list(std::move(out));
}

Value join_items(const Value& operand, CallArgs& a) {
  const std::string separator = a.get(0, "d") ? text_of(*a.get(0, "d")) : "";
  const std::optional<Value> attribute = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(operand)) {
    if (!first) out += separator;
    first = false;
    out += text_of(attribute ? attribute_path(item, text_of(*attribute)) : item);
    check_string_size(out.size());
  }
  return Value::of_string(std::move(out));
}

Value tojson(const Value& operand, CallArgs& a) {
  JsonStyle style;
  if (const std::optional<Value> indent = a.get(1, "indent"); indent && !indent->is(Kind::kNone)) {
    if (!indent->is(Kind::kInt)) fail("tojson's indent must be an integer");
    if (indent->integer > 64)
      fail("tojson's indent " + std::to_string(indent->integer) + " is above 64");
    style.indent = static_cast<int>(indent->integer);
  }
  if (const std::optional<Value> sort = a.get(3, "sort_keys")) style.sort_keys = truthy(*sort);
  if (const std::optional<Value> sep = a.get(2, "separators"); sep && !sep->is(Kind::kNone)) {
    if (!sep->is(Kind::kList) || sep->list->size() != 2) fail("tojson's separators must be a pair");
    style.separators = std::make_pair(text_of((*sep->list)[0]), text_of((*sep->list)[1]));
  }
  if (const std::optional<Value> ascii = a.get(0, "ensure_ascii"); ascii && truthy(*ascii)) {
    fail("tojson with ensure_ascii=True is not implemented");
  }
  return Value::of_string(to_json(operand, style));
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value to_int(const Value& v, CallArgs& a) {
  const Value fallback = a.get(0, "default").value_or(Value::of_int(0));
  if (v.is(Kind::kInt)) return v;
  if (v.is(Kind::kBool)) return Value::of_int(v.boolean);
  if (v.is(Kind::kFloat)) {
    if (!std::isfinite(v.real) || std::fabs(v.real) >= 9.2e18) return fallback;
    return Value::of_int(static_cast<std::int64_t>(v.real));
  }
  if (v.is(Kind::kString)) {
    const std::string s = py_strip(v.str(), nullptr, true, true);
    std::size_t used = 0;
    try {
      const long long n = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::of_int(n);
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value::of_int(static_cast<std::int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value extreme(const Value& operand, bool largest) {
  const List items = iterate(operand);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  Value best = items[0];
  for (const Value& item : items) {
    if (largest ? compare(item, best) > 0 : compare(item, best) < 0) best = item;
  }
  return best;
}

Value filter_on_list(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "first" || name == "last") {
    const List items = iterate(v);
    if (items.empty())
      return Value::undefined("'" + type_name(v) + " object' has no first or last item");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::of_list(iterate(v));
  if (name == "reverse") {
    if (v.is(Kind::kString)) {
      Value step = Value::of_int(-1);
      return get_slice(v, nullptr, nullptr, &step);
    }
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::of_list(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& item : iterate(v)) {
      const bool seen =
          std::any_of(out.begin(), out.end(), [&](const Value& o) { return equals(o, item); });
      if (!seen) out.push_back(item);
    }
    return Value::of_list(std::move(out));
  }
  if (name == "sum") {
    Value total = a.get(1, "start").value_or(Value::of_int(0));
    for (const Value& item : iterate(v)) {
      if (!item.is_number() || !total.is_number())
        fail("sum of " + type_name(item) + " is not implemented");
      if (item.is(Kind::kFloat) || total.is(Kind::kFloat)) {
        auto d = [](const Value& x) {
          return x.is(Kind::kFloat)
                     ? x.real
                     : static_cast<double>(x.is(Kind::kBool) ? x.boolean : x.integer);
        };
        total = Value::of_float(d(total) + d(item));
      } else {
        total = Value::of_int(total.integer + (item.is(Kind::kBool) ? item.boolean : item.integer));
      }
    }
    return total;
  }
  if (name == "min" || name == "max") return extreme(v, name == "max");
  if (name == "items") {
    if (v.is(Kind::kUndefined)) return Value::of_list({});
    if (!v.is(Kind::kDict)) fail("Can only get item pairs from a mapping.");
    List pairs;
    for (const auto& [k, x] : v.dict->entries)
      pairs.push_back(Value::of_list({Value::of_string(k), x}, true));
    return Value::of_list(std::move(pairs));
  }
  if (name == "selectattr" || name == "rejectattr")
    return select_items(v, a, true, name == "selectattr");
  if (name == "select" || name == "reject") return select_items(v, a, false, name == "select");
  if (name == "map") return map_items(v, a);
  return join_items(v, a);  // "join"
}

}  // namespace

bool is_known_filter(std::string_view name) { return kFilters.count(name) > 0; }
bool is_known_test(std::string_view name) { return kTests.count(name) > 0; }

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "default" || name == "d") {
    const bool boolean = a.get(1, "boolean") && truthy(*a.get(1, "boolean"));
    const bool use_default = v.is(Kind::kUndefined) || (boolean && !truthy(v));
    return use_default ? a.get(0, "default_value").value_or(Value::of_string("")) : v;
  }
  if (name == "length" || name == "count") return Value::of_int(length_of(v));
  if (name == "tojson") return tojson(v, a);
  if (name == "safe") return v;
  if (name == "string") return v.is(Kind::kString) ? v : Value::of_string(text_of(v));
  if (name == "int") return to_int(v, a);
  if (name == "float") {
    if (v.is(Kind::kFloat)) return v;
    if (v.is(Kind::kInt) || v.is(Kind::kBool))
      return Value::of_float(static_cast<double>(v.is(Kind::kBool) ? v.boolean : v.integer));
    fail("the filter 'float' of a " + type_name(v) + " is not implemented");
  }
  if (name == "abs") {
    if (v.is(Kind::kInt)) return Value::of_int(v.integer < 0 ? -v.integer : v.integer);
    if (v.is(Kind::kFloat)) return Value::of_float(std::fabs(v.real));
    fail("bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "trim") {
    const std::optional<Value> chars = a.get(0, "chars");
    return Value::of_string(py_strip(
        text_of(v), chars && chars->is(Kind::kString) ? &chars->str() : nullptr, true, true));
  }
  if (name == "upper" || name == "lower")
    return Value::of_string(ascii_case(text_of(v), name == "upper", name));
  if (name == "capitalize") {
    std::string s = ascii_case(text_of(v), false, name);
    if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 32);
    return Value::of_string(s);
  }
  if (name == "title") return Value::of_string(jinja_title(text_of(v)));
  if (name == "e" || name == "escape") return Value::of_string(html_escape(text_of(v)));
  if (name == "wordcount") {
    CallArgs none;
    return Value::of_int(
        length_of(get_attribute(Value::of_string(text_of(v)), "split").function->call(none)));
  }
  if (name == "replace") {
    CallArgs forwarded;
    forwarded.positional = a.positional;
    return get_attribute(Value::of_string(text_of(v)), "replace").function->call(forwarded);
  }
  return filter_on_list(name, v, a);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
  const std::optional<Value> arg = a.get(0, "other");
  auto need = [&]() -> const Value& {
    if (!arg) fail("the test '" + name + "' needs an argument");
    return *arg;
  };
  if (name == "defined") return !v.is(Kind::kUndefined);
  if (name == "undefined") return v.is(Kind::kUndefined);
  if (name == "none") return v.is(Kind::kNone);
  if (name == "string") return v.is(Kind::kString);
  if (name == "mapping") return v.is(Kind::kDict);
  if (name == "iterable" || name == "sequence") {
    return v.is(Kind::kList) || v.is(Kind::kDict) || v.is(Kind::kString) || v.is(Kind::kUndefined);
  }
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Kind::kInt);
  if (name == "float") return v.is(Kind::kFloat);
  if (name == "boolean") return v.is(Kind::kBool);
  if (name == "true") return v.is(Kind::kBool) && v.boolean;
  if (name == "false") return v.is(Kind::kBool) && !v.boolean;
  if (name == "callable") return v.is(Kind::kFunction);
  if (name == "equalto" || name == "eq" || name == "==") return equals(v, need());
  if (name == "ne" || name == "!=") return !equals(v, need());
  if (name == "lt" || name == "<") return compare(v, need()) < 0;
  if (name == "le" || name == "<=") return compare(v, need()) <= 0;
  if (name == "gt" || name == ">") return compare(v, need()) > 0;
  if (name == "ge" || name == ">=") return compare(v, need()) >= 0;
  if (name == "in") {
    const Value& c = need();
    if (c.is(Kind::kString))
      return v.is(Kind::kString) && c.str().find(v.str()) != std::string::npos;
    const List items = iterate(c);
    return std::any_of(items.begin(), items.end(), [&](const Value& i) { return equals(i, v); });
  }
  if (name == "odd" || name == "even") {
    if (!v.is(Kind::kInt))
      fail("the test '" + name + "' of a " + type_name(v) + " is not implemented");
    return (v.integer % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = need();
    if (!v.is(Kind::kInt) || !d.is(Kind::kInt) || d.integer == 0)
      fail("divisibleby needs nonzero integers");
    return v.integer % d.integer == 0;
  }
  if (name == "sameas") {
    const Value& o = need();
    if (v.kind != o.kind) return false;
    if (v.is(Kind::kNone) || v.is(Kind::kBool)) return equals(v, o);
    return v.list == o.list && v.dict == o.dict && v.text == o.text && v.function == o.function;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is(Kind::kString)) return false;
    const std::string mapped = ascii_case(v.str(), name == "upper", name);
    return mapped == v.str() && ascii_case(v.str(), name != "upper", name) != v.str();
  }
  fail("the test '" + name + "' is not implemented");
}

}  // namespace shardwise::text::detail::chat
