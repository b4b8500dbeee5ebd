#include "detail/json_reader.hpp"

#include "detail/unique_keys.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::detail {

nlohmann::json parse_json(std::string_view text, std::string_view what) {
  try {
    return UniqueKeys::parse(text, what);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors, and numbers beyond a double (1e999) anywhere in the text. nlohmann
    // prefixes "[json.exception.parse_error.101] "; keep the part a person reads.
    std::string message = e.what();
    if (auto pos = message.find("] "); pos != std::string::npos) message = message.substr(pos + 2);
    throw ParseError("invalid JSON in " + std::string(what) + ": " + echo_input(message, 200));
  }
}

std::string json_type_name(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number " + value.dump();
  if (value.is_string()) return "string " + echo_input(value.dump());
  return value.type_name();
}

JsonObjectReader::JsonObjectReader(const nlohmann::json& object, std::string path)
    : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw ParseError((path_.empty() ? std::string("the document") : path_) +
                     " must be a JSON object, not " + json_type_name(object_));
  }
}

std::string JsonObjectReader::field(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool JsonObjectReader::has(const std::string& key) const { return object_.contains(key); }

const nlohmann::json& JsonObjectReader::required(const std::string& key) {
  const nlohmann::json* value = optional(key);
  if (value == nullptr) throw ParseError("missing required field '" + field(key) + "'");
  return *value;
}

const nlohmann::json* JsonObjectReader::optional(const std::string& key) {
  auto it = object_.find(key);
  if (it == object_.end()) return nullptr;
  read_.insert(key);
  return &*it;
}

std::int64_t JsonObjectReader::integer(const std::string& key, std::int64_t fallback) {
  const nlohmann::json* value = optional(key);
  return value ? json_integer(*value, field(key)) : fallback;
}

std::int64_t JsonObjectReader::required_integer(const std::string& key) {
  return json_integer(required(key), field(key));
}

bool JsonObjectReader::boolean(const std::string& key, bool fallback) {
  const nlohmann::json* value = optional(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) {
    throw ParseError("field '" + field(key) + "' must be true or false, not " +
                     json_type_name(*value));
  }
  return value->get<bool>();
}

std::string JsonObjectReader::string(const std::string& key, const std::string& fallback) {
  const nlohmann::json* value = optional(key);
  return value ? json_string(*value, field(key)) : fallback;
}

std::string JsonObjectReader::required_string(const std::string& key) {
  return json_string(required(key), field(key));
}

void JsonObjectReader::finish() const {
  for (const auto& [key, value] : object_.items()) {
    if (read_.count(key) == 0) throw ParseError("unknown field '" + field(key) + "'");
  }
}

std::int64_t json_integer(const nlohmann::json& value, const std::string& field) {
  if (!value.is_number_integer()) {
    throw ParseError("field '" + field + "' must be an integer, not " + json_type_name(value));
  }
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    throw ParseError("field '" + field + "' is " + value.dump() +
                     ", beyond the largest 64-bit integer (9223372036854775807)");
  }
  return value.get<std::int64_t>();
}

std::string json_string(const nlohmann::json& value, const std::string& field) {
  if (!value.is_string()) {
    throw ParseError("field '" + field + "' must be a string, not " + json_type_name(value));
  }
  return value.get<std::string>();
}

namespace {

// A JSON list read element by element; `what` names the expected elements in the error.
template <typename T, typename ReadElement>
std::vector<T> json_list(const nlohmann::json& value, const std::string& field, const char* what,
                         ReadElement read_element) {
  if (!value.is_array()) {
    throw ParseError("field '" + field + "' must be a list of " + what + ", not " +
                     json_type_name(value));
  }
  std::vector<T> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    out.push_back(read_element(value[i], field + "[" + std::to_string(i) + "]"));
  }
  return out;
}

}  // namespace

std::vector<std::int64_t> json_integer_list(const nlohmann::json& value, const std::string& field) {
  return json_list<std::int64_t>(value, field, "integers", json_integer);
}

std::vector<std::string> json_string_list(const nlohmann::json& value, const std::string& field) {
  return json_list<std::string>(value, field, "strings", json_string);
}

std::vector<std::string> json_name_list(const nlohmann::json& value, const std::string& field) {
  return json_list<std::string>(
      value, field, "names or nulls", [](const nlohmann::json& element, const std::string& path) {
        return element.is_null() ? std::string() : json_string(element, path);
      });
}

}  // namespace shardwise::detail
