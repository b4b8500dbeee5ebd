#pragma once
// `shardwise bench runtime`: what the runtime's second part promises, each against a baseline
// from the same run: the share of an all-reduce hidden behind computing, cached reshards
// against the bare collective on a sub-communicator, and reshard against reshard_into.

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/comm/communicator.hpp"

namespace shardwise::cli {

struct RuntimeBenchRow {
  std::string name;
  std::string backend;
  int ranks = 0;
  std::int64_t bytes = 0;
  double seconds = 0;
  double baseline_seconds = 0;
  // overlap: the share hidden (0..1); axis rows: bare / reshard; allocation: reshard /
  // reshard_into.
  double ratio = 0;
  std::string note;
};

// Collective over the communicator (an even number of ranks: a 2 x n/2 mesh).
std::vector<RuntimeBenchRow> bench_runtime(Communicator& comm, std::int64_t overlap_bytes,
                                           std::int64_t reshard_bytes);

}  // namespace shardwise::cli
