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

// The default rules give what the default strategies combine to, for the strategies' names.
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
  // FSDP's names count only as the first dimension (the reference's rule); rules have no
  // positions, so the tensors below keep them there.
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
      const auto batch = std::find(names.begin(), names.end(), "batch");
      if (sharding.fsdp_parallel_size > 1 && batch != names.end()) {
        // The one documented difference: with HSDP the rules split the batch over 'fsdp' too.
        const auto d = static_cast<std::size_t>(batch - names.begin());
        EXPECT_EQ(from_rules.entry(d).axes().back(), "fsdp");
        continue;
      }
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

}  // namespace
}  // namespace shardwise
