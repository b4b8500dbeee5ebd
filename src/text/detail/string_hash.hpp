#pragma once
// Hashing for maps keyed by std::string that are looked up by std::string_view.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace shardwise::text::detail {

struct StringHash {
  using is_transparent = void;
  [[nodiscard]] std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

}  // namespace shardwise::text::detail
