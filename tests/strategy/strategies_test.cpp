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

const Mesh kMesh({"data", "fsdp", "model"}, {2, 2, 4});

TEST(ShardingStrategy, ConstraintsAndValidation) {
  DataParallelStrategy dp("data", 0);
  EXPECT_EQ(dp.get_sharding_constraints(), (ShardingConstraints{"data", 0}));
  EXPECT_EQ(DataParallelStrategy().get_sharding_constraints().mesh_axis, std::nullopt);
  EXPECT_THAT(error_of([] { DataParallelStrategy("da ta"); }), HasSubstr("axis_name 'da ta'"));
  EXPECT_THAT(error_of([] { DataParallelStrategy("data", -1); }), HasSubstr("mesh_axis is -1"));
  EXPECT_THAT(error_of([] { (void)DataParallelStrategy("data", 1).apply_sharding({8}, kMesh); }),
              HasSubstr("built for axis 'data' at mesh axis 1, but Mesh('data': 2, 'fsdp': 2, "
                        "'model': 4) has it at mesh axis 0"));
  EXPECT_THAT(error_of([] { (void)DataParallelStrategy("batch").apply_sharding({8}, kMesh); }),
              HasSubstr("data_parallel strategy axis 'batch' is not in"));
}

TEST(DataParallelStrategy, SpecAndApply) {
  DataParallelStrategy dp;
  EXPECT_EQ(dp.get_partition_spec({"batch", "sequence", "hidden"}), (P{"data", None, None}));
  EXPECT_EQ(dp.get_partition_spec({"sequence", "batch"}), (P{None, "data"}));
  EXPECT_EQ(dp.apply_sharding({8, 3}, kMesh).spec(), P{"data"});
  EXPECT_EQ(dp.apply_sharding({}, kMesh).spec(), P());
  EXPECT_THAT(error_of([&] {
                (void)dp.apply_sharding({7, 3}, kMesh);
              }),
              HasSubstr("dimension 0 has size 7, not divisible by 2 shards of ('data')"));
}

TEST(FSDPStrategy, ReferenceRules) {
  FSDPStrategy fsdp("fsdp", std::nullopt, 512);
  EXPECT_TRUE(fsdp.should_shard_weight({2048, 768}));
  EXPECT_FALSE(fsdp.should_shard_weight({256, 768}));
  EXPECT_FALSE(fsdp.should_shard_weight({}));
  EXPECT_EQ(fsdp.get_partition_spec({"out_features", "in_features"}), (P{"fsdp", None}));
  EXPECT_EQ(fsdp.get_partition_spec({"features"}), (P{"fsdp"}));
  EXPECT_EQ(fsdp.get_partition_spec({"hidden", "vocab"}), (P{"fsdp", None}));
  // Not only dimension 0 (the reference's rule): a weight in the (in, out) layout is sharded
  // along its output features too.
  EXPECT_EQ(fsdp.get_partition_spec({"in_features", "out_features"}), (P{None, "fsdp"}));
  EXPECT_EQ(fsdp.get_gradient_partition_spec({"out_features", "in_features"}), (P{"fsdp", None}));
  EXPECT_EQ(fsdp.apply_sharding({2048, 768}, kMesh).spec(), P{"fsdp"});
  EXPECT_EQ(fsdp.apply_sharding({256, 768}, kMesh).spec(), P());
}

TEST(FSDPStrategy, NonDivisibleVectorsAndScalars) {
  FSDPStrategy replicate("fsdp", std::nullopt, 4);
  EXPECT_EQ(replicate.decide({}, 2).reason, "a scalar is replicated");
  EXPECT_EQ(replicate.decide({8}, 2).spec, P{"fsdp"});  // a 1-D parameter follows the same rule
  const FsdpDecision odd = replicate.decide({7, 16}, 2);
  EXPECT_EQ(odd.spec, P());
  EXPECT_EQ(odd.reason, "dimension 0 has 7 rows, not divisible by 2 shards of 'fsdp': replicated");
  EXPECT_EQ(replicate.decide({3, 16}, 2).reason,
            "dimension 0 has 3 rows, below min_weight_size 4: replicated");
  FSDPStrategy other("fsdp", std::nullopt, 4, FsdpFallback::kShardOtherDimension);
  const FsdpDecision moved = other.decide({7, 5, 16}, 2);
  EXPECT_EQ(moved.spec, (P{None, None, "fsdp"}));
  EXPECT_THAT(moved.reason, HasSubstr("dimension 2 split instead"));
  EXPECT_EQ(other.decide({7}, 2).spec, P());
  EXPECT_EQ(other.apply_sharding({7, 5, 16}, kMesh).spec(), (P{None, None, "fsdp"}));
  EXPECT_THROW(FSDPStrategy("fsdp", std::nullopt, -1), InvalidArgument);
}

TEST(TensorParallelStrategy, ReferenceLinearSpec) {
  // The reference's get_linear_weight_spec assumes PyTorch's (out, in) layout, the default.
  EXPECT_EQ(TensorParallelStrategy("model", std::nullopt, "in_features").get_linear_weight_spec(),
            (P{None, "model"}));
  EXPECT_EQ(TensorParallelStrategy("model", std::nullopt, "out_features").get_linear_weight_spec(),
            (P{"model", None}));
  EXPECT_EQ(TensorParallelStrategy().get_linear_weight_spec(), (P{"model", None}));
}

TEST(TensorParallelStrategy, AttentionSpecsFollowTheLayout) {
  const TensorParallelStrategy torch_layout("model", std::nullopt, std::nullopt,
                                            WeightLayout::kOutIn);
  EXPECT_EQ(torch_layout.get_attention_qkv_spec(), (P{"model", None}));     // split out_features
  EXPECT_EQ(torch_layout.get_attention_output_spec(), (P{None, "model"}));  // split in_features
  // The reference's outputs are the (in, out) layout's.
  const TensorParallelStrategy flax_layout("model", std::nullopt, std::nullopt,
                                           WeightLayout::kInOut);
  EXPECT_EQ(flax_layout.get_attention_qkv_spec(), (P{None, "model"}));
  EXPECT_EQ(flax_layout.get_attention_output_spec(), (P{"model", None}));
  EXPECT_EQ(flax_layout.get_linear_weight_spec(LinearKind::kRowParallel), (P{"model", None}));
  EXPECT_EQ(torch_layout.get_linear_weight_spec(LinearKind::kColumnParallel), (P{"model", None}));
}

TEST(TensorParallelStrategy, SpecsAndApply) {
  const TensorParallelStrategy tp("model", std::nullopt, "in_features");
  EXPECT_EQ(tp.get_partition_spec({"out_features", "in_features"}), (P{None, "model"}));
  EXPECT_EQ(TensorParallelStrategy().get_partition_spec({"batch", "sequence", "hidden"}),
            (P{None, None, "model"}));
  EXPECT_EQ(tp.apply_sharding({16, 8}, kMesh).spec(), (P{None, "model"}));
  EXPECT_EQ(tp.apply_sharding({2, 3, 8}, kMesh).spec(), (P{None, None, "model"}));
  EXPECT_EQ(tp.apply_sharding({8}, kMesh).spec(), (P{"model"}));
  EXPECT_EQ(tp.apply_sharding({}, kMesh).spec(), P());
  EXPECT_THAT(error_of([] { TensorParallelStrategy("model", std::nullopt, "hidden"); }),
              HasSubstr("shard_dimension is 'hidden'; expected 'in_features', 'out_features'"));
}

TEST(PipelineParallelStrategy, AssignsLayersAsTheReference) {
  PipelineParallelStrategy pipeline(4);
  EXPECT_THAT(pipeline.assign_layers_to_stages(12), ElementsAre(3, 3, 3, 3));
  EXPECT_THAT(pipeline.assign_layers_to_stages(10), ElementsAre(3, 3, 2, 2));
  EXPECT_THAT(pipeline.assign_layers_to_stages(4), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(pipeline.assign_layers_to_stages(2, true), ElementsAre(1, 1, 0, 0));
  EXPECT_THAT(error_of([&] { (void)pipeline.assign_layers_to_stages(3); }),
              HasSubstr("3 layers cannot fill 4 pipeline stages"));
  EXPECT_THAT(error_of([&] { (void)pipeline.assign_layers_to_stages(-1); }),
              HasSubstr("num_layers is -1"));
  EXPECT_THAT(error_of([] { PipelineParallelStrategy(0); }), HasSubstr("num_stages is 0"));
}

TEST(PipelineParallelStrategy, ReplicatedAndCommunicationPatterns) {
  PipelineParallelStrategy pipeline(4);
  EXPECT_EQ(pipeline.get_partition_spec({"out_features", "in_features"}), (P{None, None}));
  const Mesh mesh({"pipeline", "data"}, {4, 2});
  EXPECT_TRUE(pipeline.apply_sharding({8, 8}, mesh).is_fully_replicated());
  using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(pipeline.get_forward_communication_pattern(), (Pairs{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(pipeline.get_backward_communication_pattern(), (Pairs{{1, 0}, {2, 1}, {3, 2}}));
  EXPECT_TRUE(PipelineParallelStrategy(1).get_forward_communication_pattern().empty());
}

}  // namespace
}  // namespace shardwise
