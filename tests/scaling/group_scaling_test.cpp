// Costs that grow with a group's size must grow linearly: a group of a million ranks is checked
// once and finds each member at once, and a collective's checks do not rescan it. CTest runs
// these under a timeout that a quadratic cost (10^12 steps at these sizes) cannot meet.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "comm/detail/checks.hpp"
#include "error_of.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using testing::error_of;

constexpr int kMillion = 1 << 20;

TEST(GroupScaling, AMillionRanksAreCheckedOnceAndEachIsFoundAtOnce) {
  std::vector<Rank> ranks(kMillion);
  std::iota(ranks.rbegin(), ranks.rend(), 0);  // kMillion - 1, ..., 0
  const Group group(ranks, "data");
  EXPECT_EQ(group.max_rank(), kMillion - 1);
  for (int i = 0; i < kMillion; ++i) ASSERT_EQ(group.index_of(ranks[static_cast<std::size_t>(i)]), i);
  EXPECT_EQ(group.index_of(kMillion), -1);
  EXPECT_EQ(group.index_of(-1), -1);
  // Every collective checks its group against the world and finds this rank in it.
  for (int i = 0; i < kMillion; i += 1021) {
    ASSERT_EQ(detail::member_index(group, ranks[static_cast<std::size_t>(i)], kMillion, "all_reduce"),
              i);
  }
  EXPECT_NE(error_of([&] { (void)detail::member_index(group, 0, kMillion - 1, "all_gather"); })
                .find("all_gather: group [1048575, 1048574"),
            std::string::npos);
}

TEST(GroupScaling, ASparseGroupFindsItsMembersToo) {
  // Ranks spread over 2^26 (a strided group along an outer mesh axis of a large world).
  std::vector<Rank> ranks(kMillion);
  for (int i = 0; i < kMillion; ++i) ranks[static_cast<std::size_t>(i)] = 64 * i + 3;
  const Group group(ranks, "data");
  for (int i = 0; i < kMillion; ++i) ASSERT_EQ(group.index_of(64 * i + 3), i);
  EXPECT_EQ(group.index_of(64), -1);
  EXPECT_EQ(group.index_of(64 * kMillion + 3), -1);
}

TEST(GroupScaling, ARepeatedOrNegativeRankIsRefusedWhenTheGroupIsMade) {
  std::vector<Rank> ranks(kMillion);
  std::iota(ranks.begin(), ranks.end(), 0);
  ranks.back() = 17;
  EXPECT_EQ(error_of([&] { (void)Group(ranks, "fsdp"); }),
            "group along 'fsdp' names rank 17 twice");
  for (Rank& r : ranks) r *= 64;  // the sparse path
  EXPECT_EQ(error_of([&] { (void)Group(ranks, "fsdp"); }),
            "group along 'fsdp' names rank 1088 twice");
  EXPECT_EQ(error_of([] { (void)Group({0, -3}, "fsdp"); }),
            "group along 'fsdp' names rank -3; ranks are 0 or more");
}

TEST(GroupScaling, CopiesShareTheirMembers) {
  std::vector<Rank> ranks(kMillion);
  std::iota(ranks.begin(), ranks.end(), 0);
  const Group group(ranks, "data");
  // A million copies of a million-rank group: free when copies share, 4 TB when they do not.
  std::vector<Group> copies(kMillion, group);
  EXPECT_EQ(&copies.back().ranks(), &group.ranks());
  EXPECT_TRUE(copies.front().same_ranks(group));
  EXPECT_EQ(copies.front().relabeled("fsdp").axes(), "fsdp");
  EXPECT_EQ(group.to_string(), "[0, 1, 2, 3, 4, 5, 6, 7, ..., 1048575] (1048576 ranks) along 'data'");
}

TEST(GroupScaling, AMeshGroupOfAMillionDevicesIsBuiltFromItsOwnCoordinates) {
  const Mesh mesh({"data", "model"}, {1024, 1024});
  // Every rank of one row and one column: linear in the group, not in the mesh.
  for (Rank rank : {0, 5000, kMillion - 1}) {
    const Group row = group_along(mesh, {"model"}, rank);
    const Group column = group_along(mesh, {"data"}, rank);
    ASSERT_EQ(row.size(), 1024);
    ASSERT_EQ(column.size(), 1024);
    EXPECT_EQ(row[0], rank / 1024 * 1024);
    EXPECT_EQ(column[0], rank % 1024);
    EXPECT_EQ(column[1] - column[0], 1024);
    EXPECT_EQ(row.index_of(rank), rank % 1024);
    EXPECT_EQ(column.index_of(rank), rank / 1024);
  }
  EXPECT_EQ(group_along(mesh, {"model", "data"}, 7).axes(), "data+model");
  EXPECT_EQ(group_along(mesh, {"model", "data"}, 7).size(), kMillion);
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitized = true;
#else
constexpr bool kThreadSanitized = false;
#endif

TEST(GroupScaling, AThousandRanksRunEveryKindOfCollective) {
  if (kThreadSanitized) {
    GTEST_SKIP() << "a thousand threads under ThreadSanitizer; the conformance suite runs the "
                    "same code on 1 to 8 ranks there";
  }
  // One rank per thread: every call's group checks and every wait are per member, not per
  // group, so a thousand ranks cost a thousand times one (minus the cores they share).
  constexpr int kRanks = 1024;
  const Mesh mesh({"data", "model"}, {256, 4});
  run_local(kRanks, [&](Communicator& comm) {
    const Group world = world_group(comm.size());
    // Above the size at which every member reduces every input (the two-phase all-reduce).
    std::vector<float> values(70000, static_cast<float>(comm.rank()));
    comm.all_reduce(values.data(), values.data(), values.size(), DType::kF32, ReduceOp::kSum,
                    world);
    const float total = static_cast<float>(kRanks) * (kRanks - 1) / 2;
    ASSERT_EQ(values.front(), total);
    ASSERT_EQ(values.back(), total);
    std::int64_t one = comm.rank();
    comm.all_reduce(&one, &one, 1, DType::kI64, ReduceOp::kMax, world);
    ASSERT_EQ(one, kRanks - 1);
    const Group data = group_along(mesh, {"data"}, comm.rank());
    std::vector<std::int32_t> gathered(static_cast<std::size_t>(data.size()));
    const std::int32_t mine = comm.rank();
    comm.all_gather(&mine, gathered.data(), 1, DType::kI32, data);
    ASSERT_TRUE(std::equal(gathered.begin(), gathered.end(), data.ranks().begin()));
    auto model = comm.split(mesh, {"model"});
    std::int64_t sum = comm.rank();
    model->all_reduce(&sum, &sum, 1, DType::kI64, ReduceOp::kSum, world_group(model->size()));
    const std::int64_t first = comm.rank() / 4 * 4;
    ASSERT_EQ(sum, 4 * first + 6);
    comm.barrier(world);
  });
}

}  // namespace
}  // namespace shardwise
