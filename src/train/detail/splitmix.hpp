#pragma once
// SplitMix64's finaliser: a counter-based hash, so that any rank derives any draw (an initial
// value, a batch position) from its coordinates alone.

#include <cstdint>
#include <string_view>

namespace shardwise::train::detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a of the bytes: stable across platforms and processes.
inline std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace shardwise::train::detail
