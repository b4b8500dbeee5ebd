// The command's argument handling: the input is an argument list (one argument per line).
// Every run ends with status 0, 1 or 2 and at most one line on stderr; `bench` and `train`
// (which run benchmarks and training jobs for seconds to minutes: `train` alone trains tiny for
// 100 steps) are left out; tests/cli covers their arguments.
#include <sstream>
#include <vector>

#include "cli.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  std::vector<std::string> args;
  std::string current;
  for (const char c : fuzz::as_text(data, size)) {
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  args.push_back(current);
  if (args.size() > 64 || args.front() == "bench" || args.front() == "train") return 0;
  std::ostringstream out;
  std::ostringstream err;
  const int status = cli::run(args, out, err);
  fuzz::require(status == 0 || status == 2);
  const std::string message = err.str();
  fuzz::require(message.empty() || message.find('\n') == message.size() - 1);
  fuzz::require(status == 0 || out.str().empty());
  return 0;
}
