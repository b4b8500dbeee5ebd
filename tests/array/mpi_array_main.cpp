// The resharding checks on the MPI backend: run under `mpirun -np 8`.
#include <gtest/gtest.h>
#include <mpi.h>

#include "reshard_checks.hpp"
#include "mpi_test_main.hpp"

namespace shardwise {
namespace {

Communicator* world = nullptr;

TEST(MpiReshard, PatternsAlongTheAxesThatChange) {
  testing::check_each_pattern_uses_its_collective_along_the_axes_that_change(*world);
}
TEST(MpiReshard, PlansAreCompiledOnceAndReused) {
  testing::check_plans_are_compiled_once_and_reused(*world);
}
TEST(MpiReshard, AnArrayOnASubMesh) {
  testing::check_an_array_on_a_sub_mesh_involves_only_its_ranks(*world);
}
TEST(MpiReshard, PartialSourcesReduceIntoTheTarget) {
  testing::check_partial_sources_reduce_into_the_target(*world);
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  return shardwise::testing::run_mpi_tests(argc, argv, shardwise::world);
}
