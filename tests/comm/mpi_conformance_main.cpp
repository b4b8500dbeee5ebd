// The conformance suite on the MPI backend: run under `mpirun -np N`; every rank runs the same
// tests, and the job fails when any rank fails.
#include <gtest/gtest.h>
#include <mpi.h>

#include "conformance_checks.hpp"
#include "mpi_test_main.hpp"

namespace shardwise {
namespace {

Communicator* world = nullptr;

TEST(MpiBackend, EveryCollectiveMatchesItsClosedForm) {
  EXPECT_EQ(world->backend(), "mpi");
  testing::run_all_checks(*world);
}

TEST(MpiBackend, ByteCountersAddUp) {
  world->counters().clear();
  const int n = world->size();
  std::vector<float> in(100, 1.0F);
  std::vector<float> out(100 * static_cast<std::size_t>(n));
  world->all_gather(in.data(), out.data(), 100, DType::kF32, world_group(n));
  EXPECT_EQ(world->counters().for_op(CommOp::kAllGather).sent, 400 * (n - 1));
  EXPECT_EQ(world->counters().for_op(CommOp::kAllGather).received, 400 * (n - 1));
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  return shardwise::testing::run_mpi_tests(argc, argv, shardwise::world);
}
