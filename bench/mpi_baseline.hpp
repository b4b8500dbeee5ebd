#pragma once
// The raw-MPI baseline of `shardwise bench` (built where MPI is found).

#include <cstddef>
#include <string>

namespace shardwise::bench {

// The seconds per call of MPI's own collective ("all_reduce" and "all_gather" in place,
// "reduce_scatter", "all_to_all", "all_to_all_in_place", "broadcast") on MPI_COMM_WORLD with
// f32 buffers of `bytes` (nccl-tests sizes: the whole output of a gather, the whole input of a
// reduce-scatter), over `iterations` calls after one warm-up call. Collective over the world.
double raw_mpi_seconds(const std::string& op, std::size_t bytes, int iterations);

}  // namespace shardwise::bench
