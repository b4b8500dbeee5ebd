#include "shardwise/strategy/multi_dimensional_strategy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// data=2 x fsdp=2 x model=2, with data, FSDP and tensor strategies.
ParallelismConfig three_axes() {
  return ParallelismConfig::from_sharding_config(ShardingConfig{.data_parallel_size = 2,
                                                                .tensor_parallel_size = 2,
                                                                .fsdp_enabled = true,
                                                                .fsdp_min_weight_size = 4,
                                                                .fsdp_parallel_size = 2});
}

MultiDimensionalStrategy data_fsdp_tensor(std::optional<std::string> tp_dimension) {
  return MultiDimensionalStrategy(
      {{"data", std::make_shared<DataParallelStrategy>()},
       {"fsdp", std::make_shared<FSDPStrategy>("fsdp", std::nullopt, 4)},
       {"tensor", std::make_shared<TensorParallelStrategy>("model", std::nullopt, tp_dimension)}},
      three_axes());
}

TEST(MultiDimensionalStrategy, AcceptsDataTensorAndFsdp) {
  const auto strategy = data_fsdp_tensor("in_features");
  EXPECT_EQ(strategy.strategies().size(), 3u);
  const SpecResolution combined =
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"});
  EXPECT_EQ(combined.spec, (P{"fsdp", "model"}));
  EXPECT_THAT(combined.dropped_axes, IsEmpty());
  const SpecResolution resolved = strategy.resolve_sharding_conflicts(
      "w", {{"fsdp", P{"fsdp", None}}, {"tensor", P{None, "model"}}});
  EXPECT_EQ(resolved.spec, (P{"fsdp", "model"}));
}

TEST(MultiDimensionalStrategy, ActivationSpec) {
  // FSDP ranks are data-parallel ranks: the batch is split over both, 'data' major.
  const auto strategy = data_fsdp_tensor(std::nullopt);
  EXPECT_EQ(strategy.get_combined_partition_spec("x", {"batch", "sequence", "hidden"}).spec,
            (P{{"data", "fsdp"}, None, "model"}));
}

TEST(MultiDimensionalStrategy, ConflictsCombineWithTensorMajor) {
  // The reference keeps 'model' and silently drops 'fsdp'; shardwise keeps both.
  const auto strategy = data_fsdp_tensor("out_features");
  const SpecResolution r =
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"});
  EXPECT_EQ(r.spec, (P{{"model", "fsdp"}, None}));
  EXPECT_THAT(r.notes, IsEmpty());
  const SpecResolution shaped =
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{8, 6});
  EXPECT_EQ(shaped.spec, (P{{"model", "fsdp"}, None}));
}

TEST(MultiDimensionalStrategy, ConflictsMoveWhenCombiningDoesNotDivide) {
  const auto strategy = data_fsdp_tensor("out_features");
  // 6 rows take 'model' (2) but not 'model' x 'fsdp' (4): 'fsdp' moves to dimension 1.
  const SpecResolution r =
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{6, 8});
  EXPECT_EQ(r.spec, (P{"model", "fsdp"}));
  EXPECT_THAT(r.notes, ElementsAre("w: axis 'fsdp' moved from dimension 0 to dimension 1: "
                                   "dimension 0 (out_features) has size 6, not divisible by 4 "
                                   "shards of ('model', 'fsdp')"));
  EXPECT_THAT(r.dropped_axes, IsEmpty());
}

TEST(MultiDimensionalStrategy, ConflictsReportWhatTheyDrop) {
  const auto strategy = data_fsdp_tensor("out_features");
  const SpecResolution r =
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{6, 5});
  EXPECT_EQ(r.spec, (P{"model", None}));
  EXPECT_THAT(r.dropped_axes, ElementsAre("fsdp"));
  EXPECT_THAT(r.notes, ElementsAre("w: axis 'fsdp' dropped: dimension 0 (out_features) has size 6, "
                                   "not divisible by 4 shards of ('model', 'fsdp'), and no free "
                                   "dimension takes it"));
}

TEST(MultiDimensionalStrategy, ShapeLetsFsdpSkipSmallWeights) {
  const auto strategy = data_fsdp_tensor("in_features");
  EXPECT_EQ(
      strategy.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{2, 8}).spec,
      (P{None, "model"}));
}

TEST(MultiDimensionalStrategy, DataAndFsdpMayShareTheDataAxis) {
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 4, .fsdp_enabled = true, .fsdp_min_weight_size = 1});
  const MultiDimensionalStrategy strategy(
      {{"dp", std::make_shared<DataParallelStrategy>("data")},
       {"fsdp", std::make_shared<FSDPStrategy>("data", std::nullopt, 1)}},
      config);
  EXPECT_EQ(strategy.get_combined_partition_spec("w", {"out_features", "in_features"}).spec,
            (P{"data", None}));
  // A batch-first activation: the data axis already splits the batch, FSDP's use of it is moot.
  const SpecResolution r = strategy.get_combined_partition_spec("x", {"batch", "hidden"});
  EXPECT_EQ(r.spec, (P{"data", None}));
}

TEST(MultiDimensionalStrategy, ValidationErrors) {
  const ParallelismConfig config = three_axes();
  EXPECT_THAT(
      error_of([&] {
        MultiDimensionalStrategy({{"a", std::make_shared<DataParallelStrategy>("data")},
                                  {"b", std::make_shared<DataParallelStrategy>("data")}},
                                 config);
      }),
      HasSubstr("strategies 'a' (data_parallel) and 'b' (data_parallel) share axis 'data'"));
  EXPECT_THAT(error_of([&] {
                MultiDimensionalStrategy({{"tp", std::make_shared<TensorParallelStrategy>("data")},
                                          {"dp", std::make_shared<DataParallelStrategy>("data")}},
                                         config);
              }),
              HasSubstr("only data-parallel and FSDP may share an axis"));
  EXPECT_THAT(
      error_of([&] {
        MultiDimensionalStrategy({{"pp", std::make_shared<PipelineParallelStrategy>(2)}}, config);
      }),
      HasSubstr("strategy 'pp' uses axis 'pipeline', which is not in"));
  EXPECT_THAT(error_of([&] {
                MultiDimensionalStrategy({{"dp", std::make_shared<DataParallelStrategy>()},
                                          {"dp", std::make_shared<FSDPStrategy>()}},
                                         config);
              }),
              HasSubstr("two strategies are named 'dp'"));
  EXPECT_THAT(error_of([] {
                MultiDimensionalStrategy({}, ParallelismConfig{{3}, {"data"}, ShardingConfig{2}});
              }),
              HasSubstr("has 3 devices"));
  const auto strategy = data_fsdp_tensor(std::nullopt);
  EXPECT_THAT(error_of([&] {
                (void)strategy.resolve_sharding_conflicts("w", {{"nobody", P()}});
              }),
              HasSubstr("no strategy is named 'nobody'"));
  EXPECT_THAT(error_of([&] {
                (void)strategy.resolve_sharding_conflicts("w", {{"data", P{"pipeline"}}});
              }),
              HasSubstr("w: strategy 'data' proposed axis 'pipeline', which is not in"));
  EXPECT_THAT(error_of([&] {
                (void)strategy.get_combined_partition_spec("w", {"batch"}, Shape{2, 2});
              }),
              HasSubstr("w: 1 logical axes for shape (2, 2)"));
}

}  // namespace
}  // namespace shardwise
