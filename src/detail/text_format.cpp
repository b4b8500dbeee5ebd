#include "text_format.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace shardwise::detail {

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out << line << '\n';
  }
  return out.str();
}

std::string with_thousands(std::int64_t value) {
  const std::string digits =
      value < 0 ? std::to_string(-(value + 1) + std::uint64_t{1}) : std::to_string(value);
  std::string out = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string bytes_text(std::uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (bytes >= (std::uint64_t{1} << 20)) {
    out << static_cast<double>(bytes) / (1 << 20) << " MiB";
  } else {
    out << static_cast<double>(bytes) / 1024 << " KiB";
  }
  return out.str();
}

std::string significant(double value, int digits) {
  std::ostringstream out;
  out << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace shardwise::detail
