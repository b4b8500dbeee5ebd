#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  // A file past `ulimit -f` is a write that fails with EFBIG, reported as a full disk is, not a
  // death by SIGXFSZ that leaves a save's temporary folder behind.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  return shardwise::cli::run(args, std::cout, std::cerr);
}
