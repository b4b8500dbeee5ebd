#pragma once
// The message of the shardwise::Error that `f` throws, so tests can assert what it says.

#include <string>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise::testing {

template <typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace shardwise::testing
