#pragma once
// The rows one pass of a chunk computes: a micro-batch's batch x seq positions (whole) and the
// residual stream's rows this rank holds (local: the whole, or 1 / degree of them under
// sequence parallelism).

#include <cstddef>

namespace shardwise::train::transformer {

struct Rows {
  std::size_t batch = 0;
  std::size_t seq = 0;
  std::size_t whole = 0;
  std::size_t local = 0;
};

}  // namespace shardwise::train::transformer
