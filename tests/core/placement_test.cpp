#include "shardwise/core/placement.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

const Mesh kMesh({"data", "fsdp", "model"}, {2, 2, 2});

TEST(Placements, FromSpecOnePerMeshAxis) {
  EXPECT_EQ(to_placements(kMesh, P{"data", None, "model"}),
            (Placements{Shard{0}, Replicate{}, Shard{2}}));
  EXPECT_EQ(to_placements(kMesh, P()), (Placements{Replicate{}, Replicate{}, Replicate{}}));
  EXPECT_EQ(to_string(to_placements(kMesh, P{None, "fsdp"})),
            "(Replicate(), Shard(dim=1), Replicate())");
}

TEST(Placements, TupleInMeshOrderNeedsNoPositions) {
  // DTensor's rule: axes that split one dimension nest in mesh order.
  EXPECT_EQ(to_placements(kMesh, P{{"data", "model"}}),
            (Placements{Shard{0}, Replicate{}, Shard{0}}));
}

TEST(Placements, TupleAgainstMeshOrderKeepsItsOrder) {
  const Placements placements = to_placements(kMesh, P{{"model", "data"}});
  EXPECT_EQ(placements, (Placements{Shard{0, 1}, Replicate{}, Shard{0, 0}}));
  EXPECT_EQ(to_string(placements),
            "(Shard(dim=0, position=1), Replicate(), Shard(dim=0, position=0))");
  EXPECT_EQ(to_partition_spec(kMesh, placements), (P{{"model", "data"}}));
}

TEST(Placements, RoundTripThroughSpecs) {
  for (const P& spec : {P(), P{"data"}, P{None, "model"}, P{{"fsdp", "data"}, "model"},
                        P{{"model", "fsdp", "data"}}, P{None, None, {"data", "model"}}}) {
    EXPECT_EQ(to_partition_spec(kMesh, to_placements(kMesh, spec)), spec) << spec.to_string();
  }
}

TEST(Placements, ToSpecPadsToRankAndResolvesNegativeDims) {
  EXPECT_EQ(to_partition_spec(kMesh, {Shard{0}, Replicate{}, Replicate{}}, 3),
            (P{"data", None, None}));
  EXPECT_EQ(to_partition_spec(kMesh, {Replicate{}, Shard{-1}, Replicate{}}, 2), (P{None, "fsdp"}));
  EXPECT_EQ(to_partition_spec(kMesh, {Replicate{}, Replicate{}, Replicate{}}), P());
}

TEST(Placements, ToSpecErrors) {
  EXPECT_THAT(error_of([] { (void)to_partition_spec(kMesh, {Shard{0}}); }),
              HasSubstr("got 1 placements for Mesh('data': 2, 'fsdp': 2, 'model': 2), which has 3 "
                        "axes"));
  EXPECT_THAT(error_of([] {
                (void)to_partition_spec(kMesh, {Partial{ReduceOp::kAvg}, Replicate{}, Shard{0}});
              }),
              HasSubstr("placement of mesh axis 'data' is Partial(avg); a PartitionSpec cannot "
                        "hold a pending reduction"));
  EXPECT_THAT(error_of([] {
                (void)to_partition_spec(kMesh, {Shard{-1}, Replicate{}, Replicate{}});
              }),
              HasSubstr("negative dimension needs the array's rank"));
  EXPECT_THAT(
      error_of([] {
        (void)to_partition_spec(kMesh, {Shard{2}, Replicate{}, Replicate{}}, 2);
      }),
      HasSubstr("placement of mesh axis 'data' shards dimension 2, outside an array of rank 2"));
  EXPECT_THAT(error_of([] {
                (void)to_partition_spec(kMesh, {Shard{0, 0}, Shard{0, 0}, Replicate{}});
              }),
              HasSubstr("axis 'fsdp' has position 0; expected distinct positions 0..1"));
  EXPECT_THAT(error_of([] {
                (void)to_partition_spec(kMesh, {Shard{0, 0}, Shard{0}, Replicate{}});
              }),
              HasSubstr("mixes Shard placements with and without a position"));
  EXPECT_THAT(error_of([] {
                (void)to_placements(kMesh, P{"data", "data"});
              }),
              HasSubstr("axis 'data' is used by dimensions 0 and 1"));
}

TEST(Placements, PartialPrintsAndReduceOpsParse) {
  EXPECT_EQ(to_string(Placement{Partial{}}), "Partial(sum)");
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    EXPECT_EQ(parse_reduce_op(to_string(op)), op);
  }
  EXPECT_THAT(error_of([] { (void)parse_reduce_op("prod"); }),
              HasSubstr("reduce op 'prod' is not one of sum, avg, max, min"));
}

}  // namespace
}  // namespace shardwise
