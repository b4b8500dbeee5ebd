#pragma once
// Strict reading of JSON objects: every value checked for its type, every unknown key an
// error, every message naming the field path ("sharding_config.data_parallel_size").

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise::detail {

// Parses text as JSON; throws ParseError naming `what` and the parser's complaint.
nlohmann::json parse_json(std::string_view text, std::string_view what);

// "integer", "string", ... for messages.
std::string json_type_name(const nlohmann::json& value);

class JsonObjectReader {
 public:
  // Throws ParseError unless `object` is a JSON object. `path` prefixes field names.
  JsonObjectReader(const nlohmann::json& object, std::string path);

  [[nodiscard]] bool has(const std::string& key) const;
  // The raw value of a required key; marks it read.
  const nlohmann::json& required(const std::string& key);
  // The raw value or nullptr; marks it read.
  const nlohmann::json* optional(const std::string& key);

  std::int64_t integer(const std::string& key, std::int64_t fallback);
  std::int64_t required_integer(const std::string& key);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  std::string required_string(const std::string& key);

  // The full name of a field, for messages: "path.key".
  [[nodiscard]] std::string field(const std::string& key) const;

  // Throws ParseError naming the first key that was never read.
  void finish() const;

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::set<std::string> read_;
};

// Typed reads of plain values, with `field` naming them in errors.
std::int64_t json_integer(const nlohmann::json& value, const std::string& field);
std::string json_string(const nlohmann::json& value, const std::string& field);
std::vector<std::int64_t> json_integer_list(const nlohmann::json& value, const std::string& field);
std::vector<std::string> json_string_list(const nlohmann::json& value, const std::string& field);
// A list of strings and nulls; a null reads as "" (an unnamed logical axis).
std::vector<std::string> json_name_list(const nlohmann::json& value, const std::string& field);

}  // namespace shardwise::detail
