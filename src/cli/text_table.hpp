#pragma once
// Plain-text helpers shared by the command's reports.

#include <cstdint>
#include <string>
#include <vector>

#include "../detail/file_io.hpp"
#include "../detail/text_format.hpp"

namespace shardwise::cli {

using shardwise::detail::bytes_text;
using shardwise::detail::format_table;
using shardwise::detail::with_thousands;

// Joins integers: ({2, 4}, " x ") -> "2 x 4".
std::string join_ints(const std::vector<std::int64_t>& values, const char* separator);

// The whole content of a file; throws shardwise::InvalidArgument naming the option and path.
// Input files are read as every layer reads them (detail/file_io.hpp).
using shardwise::detail::kMaxInputFileBytes;
using shardwise::detail::read_file;

// Writes `text` (and a newline) as the whole file `path`, which may replace a regular file there
// but never writes through a symlink or into a FIFO or folder (detail/output_file.hpp);
// FileError naming the option where it cannot (a missing folder, a full disk).
void write_text_file(const std::string& path, const std::string& text, const std::string& option);

// Refuses (InvalidArgument naming `what`) a run that needs more than half of this machine's
// memory, before it allocates any of it.
void check_fits(std::int64_t bytes_needed, const std::string& what);

}  // namespace shardwise::cli
