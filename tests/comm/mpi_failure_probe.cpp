// A program that fails on purpose under mpirun, for the failure tests:
//   throw    - rank 1 throws; the job must end promptly with its message.
//   timeout  - rank 1 never joins a barrier; rank 0 must fail after its 200 ms timeout.
#include <chrono>
#include <string>
#include <thread>

#include "shardwise/comm/mpi.hpp"
#include "shardwise/core/error.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  return shardwise::run_spmd(&argc, &argv, 2, [&](shardwise::Communicator& comm) {
    const shardwise::Group world = shardwise::world_group(comm.size());
    if (mode == "throw") {
      if (comm.rank() == 1) throw shardwise::InvalidArgument("boom");
      comm.barrier(world);
    } else if (mode == "timeout") {
      if (comm.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(20));
        return;
      }
      shardwise::BarrierOptions options;
      options.timeout = std::chrono::milliseconds(200);
      comm.barrier(world, options);
    }
  });
}
