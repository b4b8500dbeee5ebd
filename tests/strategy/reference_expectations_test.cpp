// The expectations of the reference module's own tests (docs/strategies.md), kept true, and its
// create_partition_spec done without a hard-coded layer count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/mesh_utils.hpp"
#include "shardwise/strategy/multi_dimensional_strategy.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::Ge;
using ::testing::Le;

TEST(ReferenceExpectations, ShardingConfig) {
  EXPECT_EQ((ShardingConfig{2, 4, 2}).get_total_device_count(), 16);
  EXPECT_LE(ShardingConfig::from_device_count(8).get_total_device_count(), 8);
}

TEST(ReferenceExpectations, ParallelismConfig) {
  EXPECT_TRUE(
      (ParallelismConfig{{2, 4},
                         {"data", "model"},
                         ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4}})
          .is_valid());
}

TEST(ReferenceExpectations, DataParallelSpec) {
  EXPECT_EQ(DataParallelStrategy("data", 0).get_partition_spec({"batch", "sequence", "hidden"}),
            (P{"data", None, None}));
}

TEST(ReferenceExpectations, Fsdp) {
  const FSDPStrategy fsdp("fsdp", 1, 512);
  EXPECT_TRUE(fsdp.should_shard_weight({2048, 768}));
  EXPECT_FALSE(fsdp.should_shard_weight({256, 768}));
  EXPECT_EQ(fsdp.get_gradient_partition_spec({"out_features", "in_features"}), (P{"fsdp", None}));
}

TEST(ReferenceExpectations, TensorParallel) {
  // The reference's linear-weight answer is the (out, in) layout's; its attention answers are
  // the (in, out) layout's. Each holds in its layout.
  const TensorParallelStrategy torch_layout("model", 1, "in_features", WeightLayout::kOutIn);
  EXPECT_EQ(torch_layout.get_linear_weight_spec(), (P{None, "model"}));
  const TensorParallelStrategy flax_layout("model", 1, "in_features", WeightLayout::kInOut);
  EXPECT_EQ(flax_layout.get_attention_qkv_spec().entry(1), SpecEntry("model"));
  EXPECT_EQ(flax_layout.get_attention_output_spec().entry(0), SpecEntry("model"));
}

TEST(ReferenceExpectations, Pipeline) {
  const PipelineParallelStrategy pipeline(4);
  const auto counts = pipeline.assign_layers_to_stages(12);
  ASSERT_EQ(counts.size(), 4u);
  EXPECT_EQ(counts[0] + counts[1] + counts[2] + counts[3], 12);
  EXPECT_THAT(counts, Each(AllOf(Ge(2), Le(4))));
  EXPECT_EQ(pipeline.get_forward_communication_pattern().size(), 3u);
  EXPECT_EQ(pipeline.get_backward_communication_pattern().size(), 3u);
}

TEST(ReferenceExpectations, MultiDimensional) {
  const ParallelismConfig config{{2, 2, 2},
                                 {"data", "fsdp", "model"},
                                 ShardingConfig{.data_parallel_size = 2,
                                                .tensor_parallel_size = 2,
                                                .fsdp_enabled = true,
                                                .fsdp_parallel_size = 2}};
  const MultiDimensionalStrategy strategy(
      {{"data", std::make_shared<DataParallelStrategy>("data", 0)},
       {"tensor", std::make_shared<TensorParallelStrategy>("model", 2, "in_features")},
       {"fsdp", std::make_shared<FSDPStrategy>("fsdp", 1)}},
      config);
  const SpecResolution combined =
      strategy.get_combined_partition_spec("weight", {"out_features", "in_features"});
  EXPECT_EQ(combined.spec.size(), 2u);
  const SpecResolution resolved = strategy.resolve_sharding_conflicts(
      "weight", {{"tensor", P{None, "model"}}, {"fsdp", P{"fsdp", None}}});
  EXPECT_EQ(resolved.spec, (P{"fsdp", "model"}));
}

TEST(ReferenceExpectations, MeshManager) {
  const auto two_d = get_optimal_mesh_shape(8, 2);
  EXPECT_EQ(two_d[0] * two_d[1], 8);
  const auto three_d = get_optimal_mesh_shape(16, 3);
  EXPECT_EQ(three_d[0] * three_d[1] * three_d[2], 16);
  EXPECT_TRUE(validate_mesh_config({2, 4}, 8));
  EXPECT_FALSE(validate_mesh_config({3, 3}, 8));
}

// The reference put embedding/position parameters on stage 0, output/logits on the last, and
// layer_N on stage N * stages / 24 whatever the model's depth.
TEST(ReferenceExpectations, CreatePartitionSpecUsesTheRealLayerCount) {
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(ShardingConfig{
      .data_parallel_size = 2, .tensor_parallel_size = 2, .pipeline_parallel_size = 4});
  const MultiDimensionalStrategy strategy = default_strategies(config);
  const ParameterNameRules rules(std::vector<ParameterRule>{
      {R"(^embedding$)", {"vocab", "embed"}},
      {R"(^position_embedding$)", {"positions", "embed"}},
      {R"(^layer_\d+\.attn\.w$)", {"heads", "embed"}},
      {R"(^output$)", {"vocab", "embed"}},
  });
  EXPECT_EQ(strategy.create_partition_spec({100, 8}, "embedding", rules, 12).stage, 0);
  EXPECT_EQ(strategy.create_partition_spec({16, 8}, "position_embedding", rules, 12).stage, 0);
  EXPECT_EQ(strategy.create_partition_spec({100, 8}, "output", rules, 12).stage, 3);
  // 12 layers on 4 stages: layer 11 is on the last stage (the reference said stage 1).
  const ParameterPlacement last =
      strategy.create_partition_spec({8, 8}, "layer_11.attn.w", rules, 12);
  EXPECT_EQ(last.stage, 3);
  EXPECT_EQ(last.spec, (P{"model", None}));
  EXPECT_EQ(last.logical_axes, (LogicalAxes{"heads", "embed"}));
  EXPECT_EQ(strategy.create_partition_spec({8, 8}, "layer_5.attn.w", rules, 12).stage, 1);
  // A vocabulary 'model' does not divide stays whole on that dimension.
  EXPECT_EQ(strategy.create_partition_spec({101, 8}, "output", rules, 12).spec, (P{None, None}));
  // A parameter no rule names is replicated with a note, or refused in strict mode.
  const ParameterPlacement bias = strategy.create_partition_spec({8}, "bias", rules, 12);
  EXPECT_EQ(bias.spec, P{None});
  EXPECT_EQ(bias.notes, (std::vector<std::string>{
                            "bias: no parameter rule names it: replicated",
                            "bias: no layer index and neither the first-stage nor the last-stage "
                            "rule matches it: first stage"}));
  PlacementOptions strict;
  strict.strict = true;
  EXPECT_THROW((void)strategy.create_partition_spec({8}, "bias", rules, 12, strict),
               InvalidArgument);
}

}  // namespace
}  // namespace shardwise
