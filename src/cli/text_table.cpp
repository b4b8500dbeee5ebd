#include "text_table.hpp"

#include "../detail/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise::cli {

std::string join_ints(const std::vector<std::int64_t>& values, const char* separator) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    text += (i ? separator : "") + std::to_string(values[i]);
  }
  return text;
}

void check_fits(std::int64_t bytes_needed, const std::string& what) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;
  const auto memory = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(bytes_needed) > memory / 2) {
    throw InvalidArgument(what + " needs about " + with_thousands(bytes_needed) +
                          " bytes of buffers; this machine has " +
                          with_thousands(static_cast<std::int64_t>(memory)) +
                          " bytes of memory, and a run may use half");
  }
}

void write_text_file(const std::string& path, const std::string& text, const std::string& option) {
  shardwise::detail::write_whole_file(path, text + "\n", shardwise::detail::IfExists::kReplaceFile,
                                      option);
}

}  // namespace shardwise::cli
