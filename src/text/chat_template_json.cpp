// JSON into template values (the context) and values into JSON text as transformers' tojson
// filter writes it: json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...).

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/detail/chat_template_value.hpp"

namespace shardwise::text::detail::chat {
namespace {

// Deeper context is refused rather than walked (a hostile file could nest thousands deep).
constexpr int kMaxJsonDepth = 256;

Value from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxJsonDepth) {
    fail("the context nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::of_bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::of_int(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto value = json.get<std::uint64_t>();
      if (value > static_cast<std::uint64_t>(INT64_MAX)) {
        fail("the context's integer " + std::to_string(value) + " is beyond 64 bits");
      }
      return Value::of_int(static_cast<std::int64_t>(value));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::of_float(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::of_string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, depth + 1));
      return Value::of_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        dict.entries.emplace_back(key, from_json_at(item, depth + 1));
      }
      return Value::of_dict(std::move(dict));
    }
    default: fail("the context holds a JSON value of type " + std::string(json.type_name()));
  }
}

void append_json_string(std::string& out, const std::string& text) {
  out += '"';
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", c);
          out += escape;
        } else {
          out += ch;  // ensure_ascii=False: the rest as it is
        }
    }
  }
  out += '"';
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonStyle& style) : style_(style) {
    if (style.separators) {
      item_separator_ = style.separators->first;
      key_separator_ = style.separators->second;
    } else {
      item_separator_ = style.indent ? "," : ", ";
      key_separator_ = ": ";
    }
  }

  void write(const Value& value, int level) {
    check_string_size(out.size());
    switch (value.kind) {
      case Kind::kNone: out += "null"; return;
      case Kind::kBool: out += value.boolean ? "true" : "false"; return;
      case Kind::kInt: out += std::to_string(value.integer); return;
      case Kind::kFloat: write_float(value.real); return;
      case Kind::kString: append_json_string(out, *value.text); return;
      case Kind::kList: write_list(*value.list, level); return;
      case Kind::kDict: write_dict(*value.dict, level); return;
      default: fail("Object of type " + type_name(value) + " is not JSON serializable");
    }
  }

  std::string out;

 private:
  void write_float(double x) {
    if (std::isnan(x)) {
      out += "NaN";
    } else if (std::isinf(x)) {
      out += x < 0 ? "-Infinity" : "Infinity";
    } else {
      out += py_float_repr(x);
    }
  }
  void newline(int level) {
    if (!style_.indent) return;
    out += '\n';
    out.append(static_cast<std::size_t>(std::max(0, *style_.indent) * level), ' ');
  }
  void write_list(const List& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_separator_;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out += ']';
  }
  void write_dict(const Dict& dict, int level) {
    if (dict.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& entry : dict.entries) entries.push_back(&entry);
    if (style_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += item_separator_;
      newline(level + 1);
      append_json_string(out, entries[i]->first);
      out += key_separator_;
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out += '}';
  }

  const JsonStyle& style_;
  std::string item_separator_;
  std::string key_separator_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

std::string to_json(const Value& value, const JsonStyle& style) {
  JsonWriter writer(style);
  writer.write(value, 0);
  check_string_size(writer.out.size());
  return std::move(writer.out);
}

}  // namespace shardwise::text::detail::chat
