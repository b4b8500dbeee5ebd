#pragma once
// What every harness shares: the input as text, and the rule that bad input may only ever
// surface as a shardwise::Error. Anything else (another exception, a crash, a sanitizer report,
// a leak, a hang) is a finding.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"

namespace shardwise::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs `body`; a shardwise::Error is the expected answer to bad input.
template <typename Body>
void expect_only_errors(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

// Aborts (a finding) when an invariant of the parsed value does not hold.
inline void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace shardwise::fuzz
