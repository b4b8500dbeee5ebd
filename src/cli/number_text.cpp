#include "number_text.hpp"

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

std::string significant(double value, int digits) {
  std::ostringstream out;
  out << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace shardwise::cli
