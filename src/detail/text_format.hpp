#pragma once
// Plain-text helpers every layer's reports share: tables, thousands, byte sizes.

#include <cstdint>
#include <string>
#include <vector>

namespace shardwise::detail {

// Left-aligned columns separated by two spaces; the first row is the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

// 124439808 -> "124,439,808".
std::string with_thousands(std::int64_t value);

// `value` with at most `digits` significant digits ("0.375", "0.001727").
std::string significant(double value, int digits);

// 1536 -> "1.5 KiB", 3 << 20 -> "3.0 MiB" (KiB below a MiB).
std::string bytes_text(std::uint64_t bytes);

}  // namespace shardwise::detail
