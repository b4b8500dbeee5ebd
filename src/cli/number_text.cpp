#include "number_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <system_error>

#include "shardwise/core/error.hpp"

namespace shardwise::cli {

double finite_number(const std::string& text, std::string_view flag) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    throw InvalidArgument(std::string(flag) + " is '" + echo_input(text) +
                          "'; expected a finite number");
  }
  return value;
}

std::int64_t integer(const std::string& text, std::string_view flag) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    throw InvalidArgument(std::string(flag) + " is '" + echo_input(text) +
                          "'; expected an integer of at most 64 bits");
  }
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw InvalidArgument(std::string(flag) + " is '" + echo_input(text) +
                          "'; expected an integer");
  }
  return value;
}

std::int64_t bounded(const std::string& text, std::string_view flag, std::int64_t least,
                     std::int64_t most) {
  const std::int64_t value = integer(text, flag);
  if (value < least || value > most) {
    throw InvalidArgument(std::string(flag) + " is " + echo_input(text) + "; expected " +
                          std::to_string(least) + " to " + std::to_string(most));
  }
  return value;
}

std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& flag,
                                          std::size_t vocab) {
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    ids.push_back(
        static_cast<std::int32_t>(bounded(item, flag, 0, static_cast<std::int64_t>(vocab) - 1)));
    start = comma + 1;
  }
  return ids;
}

std::vector<std::int32_t> parse_stop_ids(const std::string& text, std::size_t vocab) {
  if (text == "none") return {};
  return parse_token_ids(text, "--stop-ids", vocab);
}

}  // namespace shardwise::cli
