#include "shardwise/strategy/logical_axis_rules.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/multi_dimensional_strategy.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// A MaxText-style table (a subset of its base rules).
LogicalAxisRules maxtext_rules() {
  return LogicalAxisRules({
      {"activation_batch", {"data", "fsdp"}},
      {"activation_heads", {"tensor"}},
      {"activation_length", {"sequence"}},
      {"activation_embed", {"tensor"}},
      {"mlp", {"tensor"}},
      {"vocab", {"tensor"}},
      {"embed", {"fsdp", "sequence"}},
      {"embed", {"fsdp"}},
      {"heads", {"tensor"}},
      {"kv", {}},
      {"norm", {"tensor"}},
  });
}

TEST(LogicalAxisRules, FirstFreeRuleWins) {
  const LogicalAxisRules rules = maxtext_rules();
  EXPECT_EQ(rules.logical_to_mesh_axes({"embed", "mlp"}), (P{{"fsdp", "sequence"}, "tensor"}));
  // 'sequence' is taken by the activation length, so 'embed' falls through to its second rule.
  EXPECT_EQ(rules.logical_to_mesh_axes({"activation_length", "embed"}), (P{"sequence", "fsdp"}));
  EXPECT_EQ(
      rules.logical_to_mesh_axes({"activation_batch", "activation_length", "activation_embed"}),
      (P{{"data", "fsdp"}, "sequence", "tensor"}));
  // Rule order, not dimension order, decides who gets 'tensor' first.
  EXPECT_EQ(rules.logical_to_mesh_axes({"activation_embed", "activation_heads"}),
            (P{None, "tensor"}));
}

TEST(LogicalAxisRules, NoneRuleBlocksLaterRules) {
  const LogicalAxisRules rules({{"kv", {}}, {"kv", {"model"}}, {"heads", {"model"}}});
  EXPECT_EQ(rules.logical_to_mesh_axes({"heads", "kv"}), (P{"model", None}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"kv"}), (P{None}));
}

TEST(LogicalAxisRules, UnknownAndUnnamedDimensionsAreReplicated) {
  const LogicalAxisRules rules = maxtext_rules();
  EXPECT_EQ(rules.logical_to_mesh_axes({"", "mystery", "vocab"}), (P{None, None, "tensor"}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"", ""}), (P{None, None}));
  EXPECT_EQ(rules.logical_to_mesh_axes({}), P());
}

TEST(LogicalAxisRules, RepeatedLogicalNameIsAnError) {
  EXPECT_THAT(error_of([] {
                (void)maxtext_rules().logical_to_mesh_axes({"embed", "mlp", "embed"});
              }),
              HasSubstr("logical axis 'embed' names dimensions 0 and 2"));
}

TEST(LogicalAxisRules, AgainstAMeshDropsSizeOneAxesAndChecksNames) {
  const LogicalAxisRules rules = maxtext_rules();
  const Mesh mesh({"data", "fsdp", "sequence", "tensor"}, {2, 4, 1, 2});
  EXPECT_EQ(rules.logical_to_mesh_axes({"embed", "mlp"}, mesh), (P{"fsdp", "tensor"}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"norm"}, mesh), (P{"tensor"}));
  EXPECT_THAT(error_of([&] { (void)rules.logical_to_mesh_axes({"embed"}, Mesh({"fsdp"}, {2})); }),
              HasSubstr("names mesh axis 'data', which is not in Mesh('fsdp': 2)"));
}

TEST(LogicalAxisRules, ConstructionErrors) {
  EXPECT_THAT(error_of([] {
                LogicalAxisRules(std::vector<LogicalAxisRule>{{"", {"x"}}});
              }),
              HasSubstr("rule 0 has an empty logical name"));
  EXPECT_THAT(error_of([] {
                LogicalAxisRules(std::vector<LogicalAxisRule>{{"embed", {"x", "x"}}});
              }),
              HasSubstr("('embed', ('x', 'x')) names mesh axis 'x' twice"));
}

TEST(LogicalAxisRules, JsonRoundTripAndErrors) {
  const LogicalAxisRules rules = maxtext_rules();
  EXPECT_EQ(LogicalAxisRules::from_json(rules.to_json()).rules(), rules.rules());
  const LogicalAxisRules parsed = LogicalAxisRules::from_json(
      R"({"rules": [["batch", ["data", "fsdp"]], ["embed", "fsdp"], ["norm", null]]})");
  EXPECT_EQ(parsed.rules(), (std::vector<LogicalAxisRule>{
                                {"batch", {"data", "fsdp"}}, {"embed", {"fsdp"}}, {"norm", {}}}));
  EXPECT_THAT(error_of([] { (void)LogicalAxisRules::from_json(R"({"rules": [["a"]]})"); }),
              HasSubstr("field 'rules[0]' must be a [logical name, mesh axes] pair"));
  EXPECT_THAT(error_of([] { (void)LogicalAxisRules::from_json(R"({"rules": [["a", 3]]})"); }),
              HasSubstr("field 'rules[0][1]' must be a list of strings"));
  EXPECT_THAT(error_of([] { (void)LogicalAxisRules::from_json(R"({"rules": [], "x": 1})"); }),
              HasSubstr("unknown field 'x'"));
}

// The default rules give what the default strategies combine to, for the strategies' names
// (spec_agreement_test.cpp compares every entry point over shapes as well).
TEST(DefaultLogicalAxisRules, ReproduceTheStrategiesChoices) {
  const std::vector<ShardingConfig> configs{
      ShardingConfig{.data_parallel_size = 4},
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4},
      ShardingConfig{.data_parallel_size = 4, .fsdp_enabled = true, .fsdp_min_weight_size = 0},
      ShardingConfig{.data_parallel_size = 2,
                     .tensor_parallel_size = 2,
                     .pipeline_parallel_size = 2,
                     .fsdp_enabled = true,
                     .fsdp_min_weight_size = 0},
      ShardingConfig{.data_parallel_size = 1,
                     .tensor_parallel_size = 2,
                     .fsdp_enabled = true,
                     .fsdp_min_weight_size = 0,
                     .fsdp_parallel_size = 4},
  };
  const std::vector<LogicalAxes> tensors{
      {"batch", "sequence", "hidden"},
      {"out_features", "in_features"},
      {"hidden", "in_features"},
      {"features"},
      {"in_features", "sequence"},
      {"batch", "in_features"},
      {"out_features"},
      {"", "batch"},
  };
  for (const ShardingConfig& sharding : configs) {
    const ParallelismConfig config = ParallelismConfig::from_sharding_config(sharding);
    const MultiDimensionalStrategy strategies = default_strategies(config);
    const LogicalAxisRules rules = default_logical_axis_rules(config);
    const Mesh mesh = config.to_mesh();
    for (const LogicalAxes& names : tensors) {
      const PartitionSpec from_rules = rules.logical_to_mesh_axes(names, mesh);
      EXPECT_EQ(from_rules, strategies.get_combined_partition_spec("t", names).spec)
          << sharding.to_string() << " " << ::testing::PrintToString(names);
    }
  }
}

TEST(DefaultLogicalAxisRules, TransformerWeights) {
  const ParallelismConfig config =
      ParallelismConfig::from_sharding_config(ShardingConfig{.data_parallel_size = 2,
                                                             .tensor_parallel_size = 2,
                                                             .fsdp_enabled = true,
                                                             .fsdp_parallel_size = 2});
  const LogicalAxisRules rules = default_logical_axis_rules(config);
  const Mesh mesh = config.to_mesh();
  EXPECT_EQ(rules.logical_to_mesh_axes({"vocab", "embed"}, mesh), (P{"model", "fsdp"}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"heads", "embed"}, mesh), (P{"model", "fsdp"}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"embed", "mlp"}, mesh), (P{"fsdp", "model"}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"norm"}, mesh), (P{None}));
  EXPECT_EQ(rules.logical_to_mesh_axes({"batch", "sequence", "embed"}, mesh),
            (P{{"data", "fsdp"}, None, None}));
}

TEST(LogicalAxisRules, ResolveFitsRulesToTheShape) {
  const Mesh mesh = Mesh::parse("data=2,fsdp=2,model=4");
  const LogicalAxisRules rules({{"embed", {"fsdp"}, 1024, false},
                                {"mlp", {"model", "fsdp"}},
                                {"heads", {"model"}},
                                {"batch", {"data"}, 0, true}});
  ResolveOptions options;
  // Below min_size, 'embed' is not split and nothing is said: the rule does not apply.
  options.shape = Shape{512, 8};
  SpecResolution r = rules.resolve("w", {"embed", "heads"}, mesh, options);
  EXPECT_EQ(r.spec, (P{None, "model"}));
  EXPECT_TRUE(r.notes.empty());
  // The largest dividing prefix of a multi-axis rule stays; the rest moves to a free dimension.
  options.shape = Shape{12, 6};
  r = rules.resolve("w", {"mlp", ""}, mesh, options);
  EXPECT_EQ(r.spec, (P{"model", "fsdp"}));
  // A relocatable rule that does not fit moves; one that is not relocatable is dropped.
  options.shape = Shape{3, 4};
  r = rules.resolve("x", {"batch", ""}, mesh, options);
  EXPECT_EQ(r.spec, (P{None, "data"}));
  options.shape = Shape{3, 4};
  r = rules.resolve("w", {"heads", ""}, mesh, options);
  EXPECT_EQ(r.spec, (P{None, None}));
  EXPECT_EQ(r.dropped_axes, (std::vector<std::string>{"model"}));
  // Units: 8 heads of 4 split 4 ways; 2 heads of 4 do not, even with uneven shards.
  options.units = {{"heads", 4}};
  options.shape = Shape{32};
  EXPECT_EQ(rules.resolve("q", {"heads"}, mesh, options).spec, P{"model"});
  options.shape = Shape{8};
  options.evenness = Evenness::kUneven;
  r = rules.resolve("k", {"heads"}, mesh, options);
  EXPECT_EQ(r.spec, P{None});
  EXPECT_EQ(r.notes, (std::vector<std::string>{
                         "k: axis 'model' dropped: dimension 0 (heads) has 2 units of 4 elements, "
                         "not divisible by 4 shards of ('model')"}));
  options.shape = Shape{6};
  EXPECT_THAT(error_of([&] { (void)rules.resolve("k", {"heads"}, mesh, options); }),
              HasSubstr("k: dimension 0 (heads) has size 6, not a whole number of its units of 4"));
  options.strict = true;
  options.shape = Shape{8};
  EXPECT_THAT(error_of([&] { (void)rules.resolve("k", {"heads"}, mesh, options); }),
              HasSubstr("(strict layout)"));
}

TEST(LogicalAxisRules, JsonOptionsRoundTrip) {
  const LogicalAxisRules rules = LogicalAxisRules::from_json(
      R"({"rules": [["embed", "fsdp", {"min_size": 1024, "relocatable": true}], ["mlp", "model"]]})");
  EXPECT_EQ(rules.rules()[0], (LogicalAxisRule{"embed", {"fsdp"}, 1024, true}));
  EXPECT_EQ(LogicalAxisRules::from_json(rules.to_json()).rules(), rules.rules());
  EXPECT_THAT(error_of([] {
                (void)LogicalAxisRules::from_json(R"({"rules": [["a", "x", {"min": 1}]]})");
              }),
              HasSubstr("unknown field 'rules[0][2].min'"));
  EXPECT_THAT(error_of([] {
                (void)LogicalAxisRules::from_json(R"({"rules": [["a", "x", {"min_size": -1}]]})");
              }),
              HasSubstr("min_size -1"));
}

}  // namespace
}  // namespace shardwise
