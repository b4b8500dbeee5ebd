// Python's str(), repr(), truthiness, == and ordering of the values a chat template computes
// with, so that what a template prints is what jinja2 prints.

#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/detail/chat_template_value.hpp"
#include "text/detail/utf8.hpp"

namespace shardwise::text::detail::chat {

void fail(std::string message) { throw Failure{std::move(message)}; }

Value Value::undefined(std::string name) {
  Value v;
  v.name = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::of_bool(bool value) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = value;
  return v;
}
Value Value::of_int(std::int64_t value) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = value;
  return v;
}
Value Value::of_float(double value) {
  Value v;
  v.kind = Kind::kFloat;
  v.real = value;
  return v;
}
Value Value::of_string(std::string value) {
  check_string_size(value.size());
  Value v;
  v.kind = Kind::kString;
  v.text = std::make_shared<const std::string>(std::move(value));
  return v;
}
Value Value::of_list(List items, bool tuple) {
  Value v;
  v.kind = Kind::kList;
  v.is_tuple = tuple;
  v.list = std::make_shared<const List>(std::move(items));
  return v;
}
Value Value::of_dict(Dict entries) {
  Value v;
  v.kind = Kind::kDict;
  v.dict = std::make_shared<Dict>(std::move(entries));
  return v;
}
Value Value::of_namespace(Dict entries) {
  Value v = of_dict(std::move(entries));
  v.kind = Kind::kNamespace;
  return v;
}
Value Value::of_function(std::string name, std::function<Value(CallArgs&)> call) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return v;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

std::optional<Value> CallArgs::get(std::size_t index, std::string_view name) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void check_string_size(std::size_t bytes) {
  if (bytes > kMaxStringBytes) {
    fail("a string of " + std::to_string(bytes) + " bytes exceeds the bound of " +
         std::to_string(kMaxStringBytes));
  }
}

std::string type_name(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return value.is_tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool truthy(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return value.boolean;
    case Kind::kInt: return value.integer != 0;
    case Kind::kFloat: return value.real != 0.0;
    case Kind::kString: return !value.text->empty();
    case Kind::kList: return !value.list->empty();
    case Kind::kDict: return !value.dict->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

std::string py_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest digits that read back as `value` (Python's repr chooses the same digits).
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int exponent = std::stoi(sci.substr(e + 1));
  // repr uses the exponent form below 1e-4 and from 1e16 on.
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+',
                  exponent < 0 ? -exponent : exponent);
    return sign + mantissa + exp_text;
  }
  std::string whole;
  std::string fraction;
  if (exponent < 0) {
    whole = "0";
    fraction = std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto point = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= point) {
      whole = digits + std::string(point - digits.size(), '0');
    } else {
      whole = digits.substr(0, point);
      fraction = digits.substr(point);
    }
  }
  if (fraction.empty()) fraction = "0";
  return sign + whole + "." + fraction;
}

namespace {

// Code points repr() escapes beyond the ASCII controls: Latin-1's controls, no-break and
// format characters, and the separators and format characters of general punctuation.
bool repr_escapes(char32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
         (c >= 0x205f && c <= 0x2064) || c == 0x3000 || c == 0xfeff;
}

std::string repr_string(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  const std::vector<std::size_t> offsets = code_point_offsets(text);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    const std::size_t at = offsets[i];
    const std::size_t length = offsets[i + 1] - at;
    const char32_t c = utf8_decode(text, at, length);
    char escape[16];
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (repr_escapes(c)) {
      std::snprintf(escape, sizeof escape, c <= 0xff ? "\\x%02x" : "\\u%04x",
                    static_cast<unsigned>(c));
      out += escape;
    } else {
      out.append(text, at, length);
    }
  }
  out += quote;
  return out;
}

std::string repr_items(const List& items, bool tuple) {
  std::string out = tuple ? "(" : "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += py_repr(items[i]);
    check_string_size(out.size());
  }
  if (tuple && items.size() == 1) out += ",";
  return out + (tuple ? ")" : "]");
}

std::string repr_dict(const Dict& dict) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : dict.entries) {
    if (!first) out += ", ";
    first = false;
    out += repr_string(key) + ": " + py_repr(value);
    check_string_size(out.size());
  }
  return out + "}";
}

}  // namespace

std::string py_repr(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return value.boolean ? "True" : "False";
    case Kind::kInt: return std::to_string(value.integer);
    case Kind::kFloat: return py_float_repr(value.real);
    case Kind::kString: return repr_string(*value.text);
    case Kind::kList: return repr_items(*value.list, value.is_tuple);
    case Kind::kDict: return repr_dict(*value.dict);
    case Kind::kNamespace: return "<Namespace " + repr_dict(*value.dict) + ">";
    case Kind::kFunction:
      fail("printing the function '" + value.function->name + "' is not implemented");
  }
  return "";
}

std::string py_str(const Value& value) {
  if (value.kind == Kind::kString) return *value.text;
  return py_repr(value);
}

namespace {

double as_double(const Value& v) {
  if (v.kind == Kind::kFloat) return v.real;
  if (v.kind == Kind::kBool) return v.boolean ? 1.0 : 0.0;
  return static_cast<double>(v.integer);
}
std::int64_t as_int(const Value& v) { return v.kind == Kind::kBool ? v.boolean : v.integer; }

int compare_numbers(const Value& a, const Value& b) {
  if (a.kind != Kind::kFloat && b.kind != Kind::kFloat) {
    return as_int(a) < as_int(b) ? -1 : (as_int(a) > as_int(b) ? 1 : 0);
  }
  const double x = as_double(a);
  const double y = as_double(b);
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::kFloat && std::isnan(a.real)) return false;
    if (b.kind == Kind::kFloat && std::isnan(b.real)) return false;
    return compare_numbers(a, b) == 0;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *a.text == *b.text;
    case Kind::kList: {
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (std::size_t i = 0; i < a.list->size(); ++i) {
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [key, value] : a.dict->entries) {
        const Value* other = b.dict->find(key);
        if (other == nullptr || !equals(value, *other)) return false;
      }
      return true;
    }
    default: return a.dict == b.dict && a.function == b.function;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b);
  if (a.kind == Kind::kString && b.kind == Kind::kString) {
    // UTF-8's byte order is the code points' order, which is Python's.
    const int c = a.text->compare(*b.text);
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind == Kind::kList && b.kind == Kind::kList && a.is_tuple == b.is_tuple) {
    const std::size_t n = std::min(a.list->size(), b.list->size());
    for (std::size_t i = 0; i < n; ++i) {
      if (!equals((*a.list)[i], (*b.list)[i])) return compare((*a.list)[i], (*b.list)[i]);
    }
    return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

std::vector<std::size_t> code_point_offsets(const std::string& text) {
  std::vector<std::size_t> offsets;
  offsets.reserve(text.size() + 1);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = utf8_length(text, at);
    if (length == 0) fail("text is not UTF-8 at byte " + std::to_string(at));
    offsets.push_back(at);
    at += length;
  }
  offsets.push_back(text.size());
  return offsets;
}

}  // namespace shardwise::text::detail::chat
