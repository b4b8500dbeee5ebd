#pragma once
// What jinja2 and transformers give a chat template besides its syntax: filters and tests
// (chat_template_filters.cpp), attributes, items, slices and the methods of strings and dicts
// (chat_template_methods.cpp), and the global functions (range, namespace, dict,
// raise_exception, strftime_now). Each computes what Python computes, or fails by name.

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "text/detail/chat_template_value.hpp"

namespace shardwise::text::detail::chat {

[[nodiscard]] bool is_known_filter(std::string_view name);
[[nodiscard]] bool is_known_test(std::string_view name);
[[nodiscard]] Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
[[nodiscard]] bool apply_test(const std::string& name, const Value& operand, CallArgs& args);

// obj.name as jinja2's sandbox reads it: a dict's methods before its items, a string's methods.
[[nodiscard]] Value get_attribute(const Value& object, const std::string& name);
// obj[key]: items before attributes; an index past the end is undefined, as in jinja2.
[[nodiscard]] Value get_item(const Value& object, const Value& key);
// obj[start:stop:step] of a list, tuple or string (null bounds are absent).
[[nodiscard]] Value get_slice(const Value& object, const Value* start, const Value* stop,
                              const Value* step);
// The items a `for` walks: a list's items, a dict's keys, a string's characters.
[[nodiscard]] List iterate(const Value& value);
// Python's len().
[[nodiscard]] std::int64_t length_of(const Value& value);

// A global function by name (range, namespace, dict, raise_exception, strftime_now), or
// nullopt. strftime_now formats `now`.
[[nodiscard]] std::optional<Value> global_function(const std::string& name, const std::tm& now);

// str.upper() and str.lower() where Python's result is known (no cased letter beyond ASCII).
[[nodiscard]] std::string ascii_case(const std::string& text, bool upper, std::string_view what);
// Python's str.strip(chars) family: `chars` null strips whitespace.
[[nodiscard]] std::string py_strip(const std::string& text, const std::string* chars, bool left,
                                   bool right);

}  // namespace shardwise::text::detail::chat
