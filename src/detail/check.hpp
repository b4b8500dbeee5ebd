#pragma once
// SHARDWISE_CHECK guards internal invariants, not user input: a failure is a bug in
// shardwise, so it prints file:line and aborts instead of throwing.

#include <cstdio>
#include <cstdlib>

namespace shardwise::detail {

[[noreturn]] inline void check_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "shardwise internal error: check '%s' failed at %s:%d\n", condition, file,
               line);
  std::abort();
}

}  // namespace shardwise::detail

#define SHARDWISE_CHECK(condition)                                       \
  do {                                                                   \
    if (!(condition)) {                                                  \
      ::shardwise::detail::check_failed(#condition, __FILE__, __LINE__); \
    }                                                                    \
  } while (false)
