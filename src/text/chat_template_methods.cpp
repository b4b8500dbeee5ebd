// Attributes, items, slices and methods as jinja2's ImmutableSandboxedEnvironment gives them to
// a template, and the globals transformers adds. Methods that change a value (list.append,
// dict.update) are unsafe in that sandbox and refused here too.

#include <algorithm>
#include <set>

#include "text/detail/chat_template_builtins.hpp"
#include "text/detail/unicode_classes.hpp"
#include "text/detail/utf8.hpp"

namespace shardwise::text::detail::chat {
namespace {

std::string object_words(const Value& v) { return "'" + type_name(v) + " object'"; }

Value missing_attribute(const Value& object, const std::string& name) {
  return Value::undefined(object_words(object) + " has no attribute '" + name + "'");
}

const std::string& string_argument(const std::optional<Value>& v, const char* what) {
  if (!v || !v->is(Kind::kString)) fail(std::string(what) + " must be a string");
  return v->str();
}

std::vector<std::string> split_string(const std::string& text, const std::optional<Value>& sep,
                                      std::int64_t max_split) {
  std::vector<std::string> parts;
  if (!sep || sep->is(Kind::kNone)) {
    // Runs of whitespace separate; leading and trailing whitespace make no empty parts.
    const std::vector<std::size_t> at = code_point_offsets(text);
    std::size_t i = 0;
    const std::size_t n = at.size() - 1;
    auto space = [&](std::size_t k) {
      return py_isspace(utf8_decode(text, at[k], at[k + 1] - at[k]));
    };
    while (true) {
      while (i < n && space(i)) ++i;
      if (i == n) break;
      if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split) {
        parts.push_back(text.substr(at[i]));  // the rest keeps its trailing whitespace
        break;
      }
      std::size_t j = i;
      while (j < n && !space(j)) ++j;
      parts.push_back(text.substr(at[i], at[j] - at[i]));
      i = j;
    }
    return parts;
  }
  const std::string& s = string_argument(sep, "split's separator");
  if (s.empty()) fail("empty separator");
  std::size_t from = 0;
  while (true) {
    const std::size_t found = text.find(s, from);
    if (found == std::string::npos ||
        (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split)) {
      parts.push_back(text.substr(from));
      return parts;
    }
    parts.push_back(text.substr(from, found - from));
    from = found + s.size();
  }
}

Value string_list(const std::vector<std::string>& parts) {
  List items;
  for (const auto& p : parts) items.push_back(Value::of_string(p));
  return Value::of_list(std::move(items));
}

bool affix_matches(const std::string& text, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& s = string_argument(a, "startswith/endswith's argument");
    if (s.size() > text.size()) return false;
    return prefix ? text.compare(0, s.size(), s) == 0
                  : text.compare(text.size() - s.size(), s.size(), s) == 0;
  };
  if (affix.is(Kind::kList) && affix.is_tuple) {
    return std::any_of(affix.list->begin(), affix.list->end(), one);
  }
  return one(affix);
}

// Python's str.title(): a cased letter after an uncased character is upper, the rest lower.
std::string title_case(const std::string& text) {
  std::string out = ascii_case(text, false, "title");
  bool previous_cased = false;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z');
    if (letter && !previous_cased) c = static_cast<char>(c - 'a' + 'A');
    previous_cased = letter || (c >= 'A' && c <= 'Z');
  }
  return out;
}

std::string replace_all(const std::string& text, const std::string& old, const std::string& now,
                        std::int64_t count) {
  std::string out;
  std::size_t from = 0;
  std::int64_t done = 0;
  if (old.empty()) {
    // Python inserts `now` between characters and at both ends.
    const std::vector<std::size_t> at = code_point_offsets(text);
    for (std::size_t i = 0; i + 1 < at.size() && (count < 0 || done < count); ++i, ++done) {
      out += now;
      out.append(text, at[i], at[i + 1] - at[i]);
      check_string_size(out.size());
      from = at[i + 1];
    }
    if (count < 0 || done < count) out += now;
    return out + text.substr(from);
  }
  while (count < 0 || done < count) {
    const std::size_t found = text.find(old, from);
    if (found == std::string::npos) break;
    out.append(text, from, found - from);
    out += now;
    check_string_size(out.size());
    from = found + old.size();
    ++done;
  }
  return out + text.substr(from);
}

std::int64_t int_argument(const std::optional<Value>& v, std::int64_t fallback) {
  if (!v || v->is(Kind::kNone)) return fallback;
  if (!v->is(Kind::kInt)) fail("an integer argument is expected, got " + type_name(*v));
  return v->integer;
}

Value string_method(const std::string& text, const std::string& name, CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const std::optional<Value> chars = a.get(0, "chars");
    const std::string* set = chars && chars->is(Kind::kString) ? &chars->str() : nullptr;
    return Value::of_string(py_strip(text, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    const std::optional<Value> affix = a.get(0, "prefix");
    if (!affix) fail(name + "() takes an argument");
    return Value::of_bool(affix_matches(text, *affix, name == "startswith"));
  }
  if (name == "split")
    return string_list(split_string(text, a.get(0, "sep"), int_argument(a.get(1, "maxsplit"), -1)));
  if (name == "upper" || name == "lower")
    return Value::of_string(ascii_case(text, name == "upper", name));
  if (name == "title") return Value::of_string(title_case(text));
  if (name == "capitalize") {
    std::string out = ascii_case(text, false, name);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 32);
    return Value::of_string(out);
  }
  if (name == "replace") {
    return Value::of_string(replace_all(text, string_argument(a.get(0, "old"), "replace's old"),
                                        string_argument(a.get(1, "new"), "replace's new"),
                                        int_argument(a.get(2, "count"), -1)));
  }
  if (name == "join") {
    const std::optional<Value> items = a.get(0, "iterable");
    if (!items) fail("join() takes an argument");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(*items)) {
      if (!item.is(Kind::kString)) fail("join() takes strings, got " + type_name(item));
      if (!first) out += text;
      first = false;
      out += item.str();
      check_string_size(out.size());
    }
    return Value::of_string(std::move(out));
  }
  fail("the string method '" + name + "' is not implemented");
}

Value dict_method(const Value& object, const std::string& name, CallArgs& a) {
  const Dict& d = *object.dict;
  if (name == "get") {
    const std::optional<Value> key = a.get(0, "key");
    if (!key) fail("get() takes a key");
    if (key->is(Kind::kString)) {
      if (const Value* v = d.find(key->str())) return *v;
    }
    return a.get(1, "default").value_or(Value::none());
  }
  List items;
  for (const auto& [k, v] : d.entries) {
    if (name == "keys") items.push_back(Value::of_string(k));
    if (name == "values") items.push_back(v);
    if (name == "items") items.push_back(Value::of_list({Value::of_string(k), v}, true));
  }
  return Value::of_list(std::move(items));
}

const std::set<std::string, std::less<>> kStringMethods = {
    "strip", "lstrip", "rstrip", "startswith", "endswith", "split",
    "upper", "lower",  "title",  "capitalize", "replace",  "join"};
const std::set<std::string, std::less<>> kDictMethods = {"get", "items", "keys", "values"};
// Methods of dicts and lists that change them: the immutable sandbox refuses them.
const std::set<std::string, std::less<>> kMutators = {"pop",    "popitem", "update", "setdefault",
                                                      "clear",  "append",  "extend", "insert",
                                                      "remove", "sort",    "reverse"};

}  // namespace

std::string ascii_case(const std::string& text, bool upper, std::string_view what) {
  std::string out = text;
  bool ascii = true;
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) ascii = false;
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  if (!ascii) {
    const std::vector<std::size_t> at = code_point_offsets(text);
    for (std::size_t i = 0; i + 1 < at.size(); ++i) {
      const char32_t c = utf8_decode(text, at[i], at[i + 1] - at[i]);
      if (c >= 0x80 && is_letter(c)) {
        fail("'" + std::string(what) + "' of text with letters beyond ASCII is not implemented");
      }
    }
  }
  return out;
}

std::string py_strip(const std::string& text, const std::string* chars, bool left, bool right) {
  const std::vector<std::size_t> at = code_point_offsets(text);
  std::vector<std::size_t> set;
  if (chars != nullptr) set = code_point_offsets(*chars);
  auto strippable = [&](std::size_t k) {
    const char32_t c = utf8_decode(text, at[k], at[k + 1] - at[k]);
    if (chars == nullptr) return py_isspace(c);
    for (std::size_t j = 0; j + 1 < set.size(); ++j) {
      if (utf8_decode(*chars, set[j], set[j + 1] - set[j]) == c) return true;
    }
    return false;
  };
  std::size_t begin = 0;
  std::size_t end = at.size() - 1;
  while (left && begin < end && strippable(begin)) ++begin;
  while (right && end > begin && strippable(end - 1)) --end;
  return text.substr(at[begin], at[end] - at[begin]);
}

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is(Kind::kUndefined)) fail(object.name);
  if (kMutators.count(name) > 0 && (object.is(Kind::kList) || object.is(Kind::kDict))) {
    return Value::of_function(name, [name](CallArgs&) -> Value {
      fail("the method '" + name + "' changes a value, which the sandbox does not allow");
    });
  }
  if (object.is(Kind::kDict)) {
    if (kDictMethods.count(name) > 0) {
      return Value::of_function(
          name, [object, name](CallArgs& a) { return dict_method(object, name, a); });
    }
    if (const Value* v = object.dict->find(name)) return *v;
  }
  if (object.is(Kind::kNamespace)) {
    if (const Value* v = object.dict->find(name)) return *v;
  }
  if (object.is(Kind::kString) && kStringMethods.count(name) > 0) {
    return Value::of_function(
        name, [object, name](CallArgs& a) { return string_method(object.str(), name, a); });
  }
  return missing_attribute(object, name);
}

Value get_item(const Value& object, const Value& key) {
  if (object.is(Kind::kUndefined)) fail(object.name);
  if ((object.is(Kind::kDict) || object.is(Kind::kNamespace)) && key.is(Kind::kString)) {
    if (const Value* v = object.dict->find(key.str())) return *v;
    return get_attribute(object, key.str());
  }
  const bool index = key.is(Kind::kInt) || key.is(Kind::kBool);
  if (index && (object.is(Kind::kList) || object.is(Kind::kString))) {
    const std::int64_t n = length_of(object);
    std::int64_t i = key.is(Kind::kBool) ? key.boolean : key.integer;
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      return Value::undefined(object_words(object) + " has no element " + py_repr(key));
    }
    if (object.is(Kind::kList)) return (*object.list)[static_cast<std::size_t>(i)];
    const std::vector<std::size_t> at = code_point_offsets(object.str());
    const auto k = static_cast<std::size_t>(i);
    return Value::of_string(object.str().substr(at[k], at[k + 1] - at[k]));
  }
  if (key.is(Kind::kString)) return get_attribute(object, key.str());
  return Value::undefined(object_words(object) + " has no element " + py_repr(key));
}

Value get_slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  if (!object.is(Kind::kList) && !object.is(Kind::kString)) {
    fail("slicing a " + type_name(object) + " is not implemented");
  }
  auto bound = [](const Value* v) -> std::optional<std::int64_t> {
    if (v == nullptr || v->is(Kind::kNone)) return std::nullopt;
    if (!v->is(Kind::kInt)) fail("slice indices must be integers, got " + type_name(*v));
    return v->integer;
  };
  const std::int64_t n = length_of(object);
  const std::int64_t s = bound(step).value_or(1);
  if (s == 0) fail("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
    if (!v) return fallback;
    std::int64_t x = *v;
    if (x < 0) x += n;
    if (x < 0) return s < 0 ? std::int64_t{-1} : std::int64_t{0};
    if (x >= n) return s < 0 ? n - 1 : n;
    return x;
  };
  const std::int64_t first = adjust(bound(start), s < 0 ? n - 1 : 0);
  const std::int64_t last = adjust(bound(stop), s < 0 ? -1 : n);
  std::vector<std::int64_t> picks;
  for (std::int64_t i = first; s > 0 ? i < last : i > last; i += s) picks.push_back(i);
  if (object.is(Kind::kList)) {
    List items;
    for (const std::int64_t i : picks) items.push_back((*object.list)[static_cast<std::size_t>(i)]);
    return Value::of_list(std::move(items), object.is_tuple);
  }
  const std::vector<std::size_t> at = code_point_offsets(object.str());
  std::string out;
  for (const std::int64_t i : picks) {
    const auto k = static_cast<std::size_t>(i);
    out.append(object.str(), at[k], at[k + 1] - at[k]);
  }
  return Value::of_string(std::move(out));
}

List iterate(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined: return {};
    case Kind::kList: return *value.list;
    case Kind::kDict: {
      List keys;
      for (const auto& entry : value.dict->entries) keys.push_back(Value::of_string(entry.first));
      return keys;
    }
    case Kind::kString: {
      List chars;
      const std::vector<std::size_t> at = code_point_offsets(value.str());
      for (std::size_t i = 0; i + 1 < at.size(); ++i) {
        chars.push_back(Value::of_string(value.str().substr(at[i], at[i + 1] - at[i])));
      }
      return chars;
    }
    default: fail("'" + type_name(value) + "' object is not iterable");
  }
}

std::int64_t length_of(const Value& value) {
  switch (value.kind) {
    case Kind::kUndefined: return 0;
    case Kind::kList: return static_cast<std::int64_t>(value.list->size());
    case Kind::kDict: return static_cast<std::int64_t>(value.dict->entries.size());
    case Kind::kString:
      return static_cast<std::int64_t>(code_point_offsets(value.str()).size() - 1);
    default: fail("object of type '" + type_name(value) + "' has no len()");
  }
}

}  // namespace shardwise::text::detail::chat
