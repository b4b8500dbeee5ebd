#pragma once
// A JSON parser callback that refuses an object holding one key twice: JSON parsers keep the
// last value and drop the first in silence, so {"n_layer": 1, "n_layer": 12} would be read as
// 12 layers without a word.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {

class UniqueKeys {
 public:
  // Parses `text`; a repeated key is a ParseError naming it and `what`.
  static nlohmann::json parse(std::string_view text, std::string_view what) {
    UniqueKeys keys(what);
    return nlohmann::json::parse(
        text.begin(), text.end(),
        [&keys](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return keys.on_event(event, parsed);
        });
  }

 private:
  explicit UniqueKeys(std::string_view what) : what_(what) {}

  bool on_event(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      open_.emplace_back();
    } else if (event == Event::object_end && !open_.empty()) {
      open_.pop_back();
    } else if (event == Event::key && !open_.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_.back().insert(key).second) {
        throw ParseError(what_ + " has the key \"" + key.substr(0, 100) + "\" twice in one object");
      }
    }
    return true;
  }

  std::string what_;
  std::vector<std::set<std::string>> open_;
};

}  // namespace shardwise::detail
