// The resharding checks (reshard_checks.cpp) on the local backend; the MPI program runs the
// same ones under mpirun.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "reshard_checks.hpp"
#include "shardwise/array/placement_ops.hpp"
#include "shardwise/array/resharder.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

TEST(ScopedReshard, EachPatternUsesItsCollectiveAlongTheAxesThatChange) {
  run_local(8, testing::check_each_pattern_uses_its_collective_along_the_axes_that_change);
}
TEST(ScopedReshard, PlansAreCompiledOnceAndReused) {
  run_local(8, testing::check_plans_are_compiled_once_and_reused);
}
TEST(ScopedReshard, AnArrayOnASubMeshInvolvesOnlyItsRanks) {
  run_local(8, testing::check_an_array_on_a_sub_mesh_involves_only_its_ranks);
}
TEST(ScopedReshard, PartialSourcesReduceIntoTheTarget) {
  run_local(8, testing::check_partial_sources_reduce_into_the_target);
}

TEST(ScopedReshard, WithoutSharedBuffers) {
  for (const auto check :
       {testing::check_each_pattern_uses_its_collective_along_the_axes_that_change,
        testing::check_an_array_on_a_sub_mesh_involves_only_its_ranks}) {
    run_local(8, check, LocalOptions{false});
  }
}

// Where ranks share memory, a reshard whose pieces are strided copies them straight out of
// peers' blocks; elsewhere it packs, runs the collective and unpacks. Both give the same array
// and count the same bytes under the same keys on every rank.
TEST(ScopedReshard, CopiesFromPeersCountWhatTheCollectiveWould) {
  const Mesh mesh({"data", "model"}, {2, 4});
  struct Case {
    Shape shape;
    P from;
    P to;
  };
  const std::vector<Case> cases{
      {{16, 16}, P{None, "model"}, P{"model", None}},               // all-to-all, strided target
      {{4, 8, 8}, P{None, "model", None}, P{None, None, "model"}},  // strided source and target
      {{16, 16}, P{"data", "model"}, P{"data"}},                    // all-gather, strided target
  };
  for (const Case& c : cases) {
    const auto elements = static_cast<std::size_t>(num_elements(c.shape));
    std::vector<float> host(elements);
    std::iota(host.begin(), host.end(), 0.0F);
    std::vector<std::map<TrafficKey, ByteCount>> counted[2];
    for (bool shared : {true, false}) {
      counted[shared ? 1 : 0].resize(8);
      run_local(
          8,
          [&](Communicator& comm) {
            const ShardedArray source = shard_replicated(comm, host.data(), c.shape, DType::kF32,
                                                         NamedSharding(mesh, c.from));
            Resharder resharder(comm);
            comm.counters().clear();
            const ShardedArray moved = resharder.reshard(source, NamedSharding(mesh, c.to));
            counted[shared ? 1 : 0][static_cast<std::size_t>(comm.rank())] =
                comm.counters().entries();
            const std::vector<std::byte> whole = gather(comm, moved);
            ASSERT_EQ(whole.size(), elements * sizeof(float));
            EXPECT_EQ(std::memcmp(whole.data(), host.data(), whole.size()), 0)
                << c.from << " -> " << c.to << (shared ? " shared" : " packed");
          },
          LocalOptions{shared});
    }
    for (std::size_t r = 0; r < 8; ++r) {
      EXPECT_EQ(counted[1][r], counted[0][r]) << c.from << " -> " << c.to << " rank " << r;
      EXPECT_FALSE(counted[1][r].empty()) << c.from << " -> " << c.to << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace shardwise
