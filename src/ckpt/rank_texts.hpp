#pragma once
// Every rank's text to every rank (collective over the communicator's ranks): the lengths first,
// then the texts padded to the longest.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
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

// Collective over every rank of `comm`: returns once `done()` is true on every rank. Work that
// may take long on one rank (writing or reading a checkpoint's files) runs on another thread
// while this one takes part in a 4-byte all-reduce every few milliseconds, each within
// `timeout`: a slow disk keeps its rank answering, and a rank that stopped (a SIGSTOP, a dead
// host) fails the others within the runtime's usual timeout instead of hours later.
inline void wait_for_every_rank(Communicator& comm, const std::function<bool()>& done,
                                std::chrono::milliseconds timeout) {
  AllReduceOptions options;
  options.timeout = timeout;
  std::chrono::microseconds pause{200};
  for (;;) {
    std::int32_t mine = done() ? 1 : 0;
    std::int32_t all = 0;
    comm.all_reduce(&mine, &all, 1, DType::kI32, ReduceOp::kMin, world_group(comm.size()), options);
    if (all == 1) return;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace shardwise::ckpt::detail
