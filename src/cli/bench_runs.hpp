#pragma once
// Measurements behind `shardwise bench`: collectives and resharding, with their baselines
// measured in the same run (a plain memcpy of the same bytes on as many threads; MPI's own
// call when running under mpirun).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/comm/communicator.hpp"

namespace shardwise::cli {

struct CommBenchRow {
  std::string op;
  std::string backend;
  int ranks = 0;
  std::int64_t bytes = 0;  // nccl-tests size: the whole buffer (gathered output, reduced input)
  double seconds = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double memcpy_gbps = 0;
  std::optional<double> mpi_raw_busbw_gbps;
};

struct ReshardBenchRow {
  std::string from;
  std::string to;
  std::string backend;
  int ranks = 0;
  std::int64_t array_bytes = 0;
  std::int64_t max_rank_bytes = 0;  // the most any rank had to receive
  // The largest target block: a rank writes all of it, received or copied from its own block.
  std::int64_t max_rank_written_bytes = 0;
  double seconds = 0;
  double reshard_gbps = 0;            // max_rank_bytes / seconds
  double memcpy_gbps = 0;             // max_rank_bytes copied by as many threads at once
  double written_memcpy_seconds = 0;  // max_rank_written_bytes copied by as many threads at once
};

// nccl-tests' bus bandwidth factor: all-reduce 2(n-1)/n; gather, scatter, all-to-all (n-1)/n.
double bus_factor(const std::string& op, int ranks);

// Every op at every size on this communicator (collective). Rows are filled on rank 0.
std::vector<CommBenchRow> bench_collectives(Communicator& comm, const std::vector<std::string>& ops,
                                            const std::vector<std::int64_t>& sizes,
                                            bool with_raw_mpi);

// Every pair of a set of shardings of a 2 x (n/2) mesh, for an f32 array of `bytes`.
std::vector<ReshardBenchRow> bench_reshards(Communicator& comm, std::int64_t bytes);

}  // namespace shardwise::cli
