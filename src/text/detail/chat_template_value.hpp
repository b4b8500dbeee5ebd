#pragma once
// The values a chat template computes with, and what Python does with them: str() and repr(),
// truthiness, ==, ordering, json.dumps (transformers' tojson). Strings are UTF-8; where Python
// counts characters (len, indexes, slices) they are counted in code points.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardwise::text::detail::chat {

// A failure while rendering, as jinja2 raises it; the renderer adds the template's position
// where the operation that failed has one.
struct Failure {
  std::string message;
  bool raised_by_template = false;  // raise_exception(...)
  bool located = false;
  int line = 0;
  int column = 0;
};
[[noreturn]] void fail(std::string message);

struct Value;
struct Dict;
struct Function;
using List = std::vector<Value>;

enum class Kind : std::uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // a list, or a tuple where is_tuple (they print differently)
  kDict,
  kNamespace,  // namespace(...): the one value a template may change
  kFunction,
};

struct Value {
  Kind kind = Kind::kUndefined;
  bool is_tuple = false;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0;
  std::shared_ptr<const std::string> text;
  std::shared_ptr<const List> list;
  std::shared_ptr<Dict> dict;  // shared by every copy, changed only where kind is kNamespace
  std::shared_ptr<const Function> function;
  std::string name;  // what an undefined value was called, for "'x' is undefined"

  static Value undefined(std::string name);
  static Value none();
  static Value of_bool(bool value);
  static Value of_int(std::int64_t value);
  static Value of_float(double value);
  static Value of_string(std::string value);
  static Value of_list(List items, bool tuple = false);
  static Value of_dict(Dict entries);
  static Value of_namespace(Dict entries);
  static Value of_function(std::string name, std::function<Value(struct CallArgs&)> call);

  [[nodiscard]] bool is(Kind k) const { return kind == k; }
  [[nodiscard]] bool is_number() const {
    return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool;
  }
  [[nodiscard]] bool is_mapping() const { return kind == Kind::kDict; }
  [[nodiscard]] const std::string& str() const { return *text; }
};

struct Dict {
  std::vector<std::pair<std::string, Value>> entries;  // in insertion order, as Python's dict
  [[nodiscard]] const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // The argument at `index` or named `name`, or nullopt.
  [[nodiscard]] std::optional<Value> get(std::size_t index, std::string_view name) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

// The longest string any operation may build: the output's bound, so that "x" * 10**9 or a
// join of a huge list fails at once.
inline constexpr std::size_t kMaxStringBytes = std::size_t{64} << 20;
void check_string_size(std::size_t bytes);

// Python's names of the types, for messages: "str", "int", "dict", "undefined".
[[nodiscard]] std::string type_name(const Value& value);
[[nodiscard]] bool truthy(const Value& value);
[[nodiscard]] std::string py_str(const Value& value);   // str(x); an undefined value is ""
[[nodiscard]] std::string py_repr(const Value& value);  // repr(x)
[[nodiscard]] std::string py_float_repr(double value);  // repr(1.0) == "1.0"
[[nodiscard]] bool equals(const Value& a, const Value& b);
// <0, 0, >0 as Python orders numbers, strings and lists; fails naming both types otherwise.
[[nodiscard]] int compare(const Value& a, const Value& b);

// json.dumps(value, ensure_ascii=False, indent=indent, separators=..., sort_keys=sort_keys).
struct JsonStyle {
  std::optional<int> indent;
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;
};
[[nodiscard]] std::string to_json(const Value& value, const JsonStyle& style);

[[nodiscard]] Value from_json(const nlohmann::ordered_json& json);

// Python's str.isspace() for one code point.
[[nodiscard]] bool py_isspace(char32_t c);
// The code points of UTF-8 text (fails where it is not UTF-8).
[[nodiscard]] std::vector<std::size_t> code_point_offsets(const std::string& text);

}  // namespace shardwise::text::detail::chat
