#pragma once
// Plain-text helpers shared by the command's reports.

#include <cstdint>
#include <string>
#include <vector>

namespace shardwise::cli {

// Left-aligned columns separated by two spaces; the first row is the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows);

// 124439808 -> "124,439,808".
std::string with_thousands(std::int64_t value);

// Joins integers: ({2, 4}, " x ") -> "2 x 4".
std::string join_ints(const std::vector<std::int64_t>& values, const char* separator);

// The whole content of a file; throws shardwise::InvalidArgument naming the option and path.
std::string read_file(const std::string& path, const std::string& option);

}  // namespace shardwise::cli
