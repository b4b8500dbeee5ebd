#pragma once
// The `shardwise` command, callable in-process: tests run it with their own streams.

#include <iosfwd>
#include <string>
#include <vector>

namespace shardwise::cli {

// Runs `shardwise <args...>` (args exclude the program name). Returns the exit status:
// 0 on success, 2 for bad input (one line on `err`, nothing on `out`), 1 for a failure of
// shardwise itself.
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace shardwise::cli
