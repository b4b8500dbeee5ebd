// The raw-MPI baseline of `shardwise bench`: MPI's own collectives on MPI_COMM_WORLD, timed
// the same way as the backends' rows.
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mpi_baseline.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::bench {

double raw_mpi_seconds(const std::string& op, std::size_t bytes, int iterations) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::size_t count = bytes / sizeof(float);
  const std::size_t per_rank = count / static_cast<std::size_t>(size);
  std::vector<float> in(std::max<std::size_t>(count, 1), 1.0F);
  std::vector<float> out(std::max<std::size_t>(count, 1));
  const int block = static_cast<int>(per_rank);
  // The same variants as the benchmark's backend rows: all-reduce and all-gather in place.
  auto call = [&] {
    if (op == "all_reduce") {
      MPI_Allreduce(MPI_IN_PLACE, out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    } else if (op == "all_gather") {
      MPI_Allgather(MPI_IN_PLACE, block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "reduce_scatter") {
      MPI_Reduce_scatter_block(in.data(), out.data(), block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (op == "all_to_all") {
      MPI_Alltoall(in.data(), block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "all_to_all_in_place") {
      MPI_Alltoall(MPI_IN_PLACE, block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "broadcast") {
      MPI_Bcast(in.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    } else {
      throw InvalidArgument("no raw MPI baseline for '" + op + "'");
    }
  };
  call();
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  return (MPI_Wtime() - start) / iterations;
}

}  // namespace shardwise::bench
