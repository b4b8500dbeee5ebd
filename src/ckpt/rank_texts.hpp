#pragma once
// Every rank's text to every rank (collective over the communicator's ranks): the lengths first,
// then the texts padded to the longest.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise::ckpt::detail {

inline std::vector<std::string> gather_texts(Communicator& comm, const std::string& mine,
                                             std::chrono::milliseconds timeout) {
  const Group world = world_group(comm.size());
  AllGatherOptions options;
  options.timeout = timeout;
  const auto n = static_cast<std::size_t>(comm.size());
  const std::int64_t length = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> lengths(n);
  comm.all_gather(&length, lengths.data(), 1, DType::kI64, world, options);
  std::size_t longest = 0;
  for (const std::int64_t l : lengths) longest = std::max(longest, static_cast<std::size_t>(l));
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * n, '\0');
  comm.all_gather(padded.data(), all.data(), longest, DType::kU8, world, options);
  std::vector<std::string> texts;
  for (std::size_t r = 0; r < n; ++r) {
    texts.push_back(all.substr(r * longest, static_cast<std::size_t>(lengths[r])));
  }
  return texts;
}

// Throws CheckpointError alike on every rank where any rank's text (one per rank, from
// gather_texts) is an error: the first failing rank's, and how many others failed.
inline void throw_if_any_failed(const std::vector<std::string>& errors, const std::string& what) {
  std::size_t failed = 0;
  std::size_t first = 0;
  for (std::size_t r = errors.size(); r-- > 0;) {
    if (!errors[r].empty()) {
      ++failed;
      first = r;
    }
  }
  if (failed == 0) return;
  throw CheckpointError(
      what + ": rank " + std::to_string(first) + ": " + errors[first] +
      (failed > 1 ? " (and " + std::to_string(failed - 1) + " more ranks failed)" : std::string()));
}

}  // namespace shardwise::ckpt::detail
