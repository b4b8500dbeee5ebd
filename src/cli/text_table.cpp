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

std::string read_file(const std::string& path, const std::string& option) {
  const std::string quoted = option + " '" + echo_input(path) + "'";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw InvalidArgument("cannot read " + quoted + ": " + std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) throw InvalidArgument(quoted + " is a directory, not a file");
  if (!S_ISREG(info.st_mode)) {
    throw InvalidArgument(quoted + " is not a regular file (a device, pipe or socket)");
  }
  if (info.st_size > kMaxInputFileBytes) {
    throw InvalidArgument(quoted + " has " + with_thousands(info.st_size) +
                          " bytes; input files are read up to " +
                          with_thousands(kMaxInputFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidArgument("cannot read " + quoted + ": " + std::strerror(errno));
  }
  std::string content(static_cast<std::size_t>(info.st_size), '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(in.gcount()));
  return content;
}

void write_text_file(const std::string& path, const std::string& text, const std::string& option) {
  shardwise::detail::write_whole_file(path, text + "\n", shardwise::detail::IfExists::kReplaceFile,
                                      option);
}

}  // namespace shardwise::cli
