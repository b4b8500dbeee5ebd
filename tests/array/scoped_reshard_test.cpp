// The resharding checks (reshard_checks.cpp) on the local backend; the MPI program runs the
// same ones under mpirun.
#include <gtest/gtest.h>

#include "reshard_checks.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

TEST(ScopedReshard, EachPatternUsesItsCollectiveAlongTheAxesThatChange) { run_local(8, testing::check_each_pattern_uses_its_collective_along_the_axes_that_change); }
TEST(ScopedReshard, PlansAreCompiledOnceAndReused) { run_local(8, testing::check_plans_are_compiled_once_and_reused); }
TEST(ScopedReshard, AnArrayOnASubMeshInvolvesOnlyItsRanks) { run_local(8, testing::check_an_array_on_a_sub_mesh_involves_only_its_ranks); }
TEST(ScopedReshard, PartialSourcesReduceIntoTheTarget) { run_local(8, testing::check_partial_sources_reduce_into_the_target); }

TEST(ScopedReshard, WithoutSharedBuffers) {
  for (const auto check : {testing::check_each_pattern_uses_its_collective_along_the_axes_that_change, testing::check_an_array_on_a_sub_mesh_involves_only_its_ranks}) {
    run_local(8, check, LocalOptions{false});
  }
}

}  // namespace
}  // namespace shardwise
