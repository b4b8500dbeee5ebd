// The global functions a chat template may call: jinja2's range (bounded as the sandbox bounds
// it), dict and namespace, and transformers' raise_exception and strftime_now.

#include <array>

#include "text/detail/chat_template_builtins.hpp"

namespace shardwise::text::detail::chat {
namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

Value range(CallArgs& a) {
  if (!a.named.empty()) fail("range() takes no keyword arguments");
  std::array<std::int64_t, 3> v{0, 0, 1};
  if (a.positional.empty() || a.positional.size() > 3) fail("range() takes 1 to 3 arguments");
  for (std::size_t i = 0; i < a.positional.size(); ++i) {
    const Value& x = a.positional[i];
    if (!x.is(Kind::kInt) && !x.is(Kind::kBool)) {
      fail("'" + type_name(x) + "' object cannot be interpreted as an integer");
    }
    v[i] = x.is(Kind::kBool) ? x.boolean : x.integer;
  }
  if (a.positional.size() == 1) v = {0, v[0], 1};
  const auto [start, stop, step] = v;
  if (step == 0) fail("range() arg 3 must not be zero");
  // The count without overflow: the bounds are 64-bit, their difference may not be.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  const long double count = span / static_cast<long double>(step);
  if (count > static_cast<long double>(kMaxRange)) {
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  List items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    items.push_back(Value::of_int(i));
  }
  return Value::of_list(std::move(items));
}

Dict keyword_dict(CallArgs& a, const char* what) {
  Dict d;
  for (const Value& p : a.positional) {
    if (!p.is(Kind::kDict)) fail(std::string(what) + "() takes a dict or keyword arguments");
    for (const auto& [k, v] : p.dict->entries) d.set(k, v);
  }
  for (auto& [k, v] : a.named) d.set(k, v);
  return d;
}

}  // namespace

std::optional<Value> global_function(const std::string& name, const std::tm& now) {
  if (name == "range") return Value::of_function(name, range);
  if (name == "dict") {
    return Value::of_function(name,
                              [](CallArgs& a) { return Value::of_dict(keyword_dict(a, "dict")); });
  }
  if (name == "namespace") {
    return Value::of_function(name, [](CallArgs& a) {
      Dict d = keyword_dict(a, "namespace");
      for (const auto& entry : d.entries) {
        if (!entry.first.empty() && entry.first[0] == '_') {
          fail(
              "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
              "'" +
              entry.first + "'");
        }
      }
      return Value::of_namespace(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return Value::of_function(name, [](CallArgs& a) -> Value {
      const std::optional<Value> message = a.get(0, "message");
      throw Failure{message ? py_str(*message) : std::string(), true};
    });
  }
  if (name == "strftime_now") {
    return Value::of_function(name, [now](CallArgs& a) {
      const std::optional<Value> format = a.get(0, "format");
      if (!format || !format->is(Kind::kString)) fail("strftime_now() takes a format string");
      if (format->str().size() > 256) fail("strftime_now()'s format is longer than 256 bytes");
      std::array<char, 4096> buffer{};
      const std::size_t n =
          std::strftime(buffer.data(), buffer.size(), format->str().c_str(), &now);
      if (n == 0 && !format->str().empty())
        fail("strftime_now() could not format '" + format->str() + "'");
      return Value::of_string(std::string(buffer.data(), n));
    });
  }
  return std::nullopt;
}

}  // namespace shardwise::text::detail::chat
