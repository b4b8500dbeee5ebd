// Every entry point that answers "which spec does this tensor get" gives the same answer and
// the same notes: a strategy alone, a MultiDimensionalStrategy, the default logical-axis rules,
// create_partition_spec and a model layout, over every logical-axis naming the project ships,
// a sweep of shapes (zero, one, non-divisible, below FSDP's minimum) and several meshes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/model_layout.hpp"
#include "shardwise/strategy/multi_dimensional_strategy.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The namings of the default parameter-name rules and of the strategies' own vocabulary.
std::vector<LogicalAxes> shipped_namings() {
  std::set<LogicalAxes> namings;
  const ParameterNameRules defaults = ParameterNameRules::defaults();
  for (const ParameterRule& rule : defaults.rules()) {
    namings.insert(rule.logical_axes);
  }
  for (const LogicalAxes& names : std::vector<LogicalAxes>{
           {"batch", "sequence", "hidden"},
           {"batch", "sequence", "embed"},
           {"out_features", "in_features"},
           {"in_features", "out_features"},
           {"hidden", "in_features"},
           {"x", "hidden"},
           {"features"},
           {"out_features"},
           {"batch", "in_features"},
           {"", "batch"},
           {"vocab", "embed"},
           {"batch", "sequence", "heads", "head_dim"},
       }) {
    namings.insert(names);
  }
  return {namings.begin(), namings.end()};
}

// Every shape of the given rank with sizes from a small set.
std::vector<Shape> shapes_of_rank(std::size_t rank) {
  const std::vector<std::int64_t> sizes{0, 1, 6, 8, 24, 1026, 2048};
  std::vector<Shape> shapes{Shape{}};
  for (std::size_t d = 0; d < rank; ++d) {
    std::vector<Shape> longer;
    for (const Shape& shape : shapes) {
      for (std::int64_t size : sizes) {
        Shape next = shape;
        next.push_back(size);
        longer.push_back(std::move(next));
      }
    }
    shapes = std::move(longer);
  }
  return shapes;
}

std::vector<ShardingConfig> configs() {
  return {
      ShardingConfig{.data_parallel_size = 4},
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4},
      ShardingConfig{.data_parallel_size = 4, .fsdp_enabled = true, .fsdp_min_weight_size = 0},
      ShardingConfig{.data_parallel_size = 2,
                     .tensor_parallel_size = 2,
                     .fsdp_enabled = true,
                     .fsdp_min_weight_size = 0,
                     .fsdp_parallel_size = 2},
      ShardingConfig{.data_parallel_size = 1,
                     .tensor_parallel_size = 2,
                     .fsdp_enabled = true,
                     .fsdp_min_weight_size = 1024,
                     .fsdp_parallel_size = 4},
      ShardingConfig{.data_parallel_size = 2,
                     .tensor_parallel_size = 2,
                     .pipeline_parallel_size = 2,
                     .fsdp_enabled = true,
                     .fsdp_min_weight_size = 8},
  };
}

// The parameter-name rule that gives a parameter named "layers.0.t" these logical axes.
ParameterNameRules naming_rule(const LogicalAxes& names) {
  return ParameterNameRules(std::vector<ParameterRule>{{R"(\.t$)", names}});
}

struct Answer {
  PartitionSpec spec;
  std::vector<std::string> notes;
  friend bool operator==(const Answer&, const Answer&) = default;
};

std::ostream& operator<<(std::ostream& out, const Answer& answer) {
  out << answer.spec.to_string();
  for (const std::string& note : answer.notes) out << "\n  " << note;
  return out;
}

TEST(SpecAgreement, RulesStrategiesPlacementAndLayoutGiveOneAnswer) {
  const std::string name = "layers.0.t";
  const AxisUnits units{{"heads", 4}, {"kv_heads", 4}};
  std::size_t compared = 0;
  std::size_t with_notes = 0;
  for (const ShardingConfig& sharding : configs()) {
    const ParallelismConfig config = ParallelismConfig::from_sharding_config(sharding);
    const Mesh mesh = config.to_mesh();
    const MultiDimensionalStrategy strategies = default_strategies(config);
    const LogicalAxisRules rules = default_logical_axis_rules(config);
    for (const LogicalAxes& names : shipped_namings()) {
      const ParameterNameRules name_rules = naming_rule(names);
      for (const Shape& shape : shapes_of_rank(names.size())) {
        bool whole_units = true;
        for (std::size_t d = 0; d < names.size(); ++d) {
          if (units.count(names[d]) != 0 && shape[d] % units.at(names[d]) != 0) whole_units = false;
        }
        if (!whole_units) continue;
        ResolveOptions options;
        options.shape = shape;
        options.units = units;
        const SpecResolution from_rules = rules.resolve(name, names, mesh, options);
        const Answer expected{from_rules.spec, from_rules.notes};

        const SpecResolution combined =
            strategies.get_combined_partition_spec(name, names, shape, units);
        PlacementOptions placement_options;
        placement_options.units = units;
        const ParameterPlacement placement =
            strategies.create_partition_spec(shape, name, name_rules, 2, placement_options);
        // A scalar in layer 1 gives the pipelined meshes two layers to place.
        ModelManifest manifest{{{name, shape, DType::kF32, std::nullopt},
                                {"layers.1.s", {}, DType::kF32, LogicalAxes{}}},
                               units,
                               std::nullopt};
        const ModelLayout layout = layout_model(manifest, mesh, rules, name_rules);

        const std::string where =
            sharding.to_string() + " " + ::testing::PrintToString(names) + " " + to_string(shape);
        EXPECT_EQ((Answer{combined.spec, combined.notes}), expected) << where;
        EXPECT_EQ((Answer{placement.spec, placement.notes}), expected) << where;
        EXPECT_EQ((Answer{layout.parameters.at(0).spec, layout.notes}), expected) << where;
        EXPECT_EQ(combined.dropped_axes, from_rules.dropped_axes) << where;
        EXPECT_EQ(placement.dropped_axes, from_rules.dropped_axes) << where;
        ++compared;
        if (!expected.notes.empty()) ++with_notes;
      }
    }
  }
  // The sweep is not vacuous: it covers thousands of cases, many with moves or drops.
  EXPECT_GT(compared, 5000u);
  EXPECT_GT(with_notes, 500u);
}

// Each strategy's specs merged by resolve_sharding_conflicts equal the combined spec.
TEST(SpecAgreement, ResolvingProposalsEqualsCombining) {
  for (const ShardingConfig& sharding : configs()) {
    const ParallelismConfig config = ParallelismConfig::from_sharding_config(sharding);
    const MultiDimensionalStrategy strategies = default_strategies(config);
    for (const LogicalAxes& names : shipped_namings()) {
      std::map<std::string, PartitionSpec> proposed;
      for (const auto& [strategy_name, strategy] : strategies.strategies()) {
        proposed[strategy_name] = strategy->get_partition_spec(names);
      }
      EXPECT_EQ(strategies.resolve_sharding_conflicts("t", proposed).spec,
                strategies.get_combined_partition_spec("t", names).spec)
          << sharding.to_string() << " " << ::testing::PrintToString(names);
    }
  }
}

// A MultiDimensionalStrategy of one strategy answers as that strategy does alone.
TEST(SpecAgreement, ACombinationOfOneIsThatStrategy) {
  const ParallelismConfig config =
      ParallelismConfig::from_sharding_config(ShardingConfig{.data_parallel_size = 4,
                                                             .tensor_parallel_size = 2,
                                                             .fsdp_enabled = true,
                                                             .fsdp_min_weight_size = 8,
                                                             .fsdp_parallel_size = 2});
  const Mesh mesh = config.to_mesh();
  const std::vector<std::shared_ptr<const ShardingStrategy>> alone{
      std::make_shared<DataParallelStrategy>(),
      std::make_shared<FSDPStrategy>("fsdp", std::nullopt, 8),
      std::make_shared<FSDPStrategy>("fsdp", std::nullopt, 8, FsdpFallback::kShardOtherDimension),
      std::make_shared<TensorParallelStrategy>(),
      std::make_shared<TensorParallelStrategy>("model", std::nullopt, "in_features"),
      std::make_shared<TensorParallelStrategy>("model", std::nullopt, "out_features"),
  };
  for (const auto& strategy : alone) {
    const MultiDimensionalStrategy one({{"only", strategy}}, config);
    for (const LogicalAxes& names : shipped_namings()) {
      EXPECT_EQ(one.get_combined_partition_spec("t", names).spec,
                strategy->get_partition_spec(names));
      for (const Shape& shape : shapes_of_rank(names.size())) {
        ResolveOptions options;
        options.shape = shape;
        EXPECT_EQ(one.get_combined_partition_spec("t", names, shape),
                  strategy->resolve("t", names, mesh, options))
            << to_string(strategy->kind()) << " " << ::testing::PrintToString(names) << " "
            << to_string(shape);
      }
    }
  }
}

// The spec without the replicated dimensions at its end.
PartitionSpec trimmed(const PartitionSpec& spec) {
  std::vector<SpecEntry> entries = spec.entries();
  while (!entries.empty() && entries.back().is_replicated()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

// apply_sharding (positional, no names) agrees with the named spec where the reference's
// positions and the names say the same thing.
TEST(SpecAgreement, ApplyShardingAgreesWithTheNamedSpec) {
  const Mesh mesh = Mesh::parse("fsdp=4");
  for (const FsdpFallback fallback :
       {FsdpFallback::kReplicate, FsdpFallback::kShardOtherDimension}) {
    const FSDPStrategy fsdp("fsdp", std::nullopt, 8, fallback);
    for (std::size_t rank = 1; rank <= 3; ++rank) {
      LogicalAxes names(rank);
      names[0] = "out_features";
      for (const Shape& shape : shapes_of_rank(rank)) {
        ResolveOptions options;
        options.shape = shape;
        EXPECT_EQ(trimmed(fsdp.resolve("w", names, mesh, options).spec),
                  fsdp.apply_sharding(shape, mesh).spec())
            << to_string(shape);
      }
    }
  }
  const DataParallelStrategy dp;
  const Mesh data = Mesh::parse("data=4");
  for (const Shape& shape : shapes_of_rank(2)) {
    if (shape[0] % 4 != 0) continue;  // apply_sharding refuses; the named path drops with a note
    ResolveOptions options;
    options.shape = shape;
    EXPECT_EQ(trimmed(dp.resolve("x", {"batch", ""}, data, options).spec),
              dp.apply_sharding(shape, data).spec());
  }
}

// The cases that used to move an axis no other strategy claimed.
TEST(SpecAgreement, NoMoveWithoutAConflict) {
  const ParallelismConfig data4 =
      ParallelismConfig::from_sharding_config(ShardingConfig{.data_parallel_size = 4});
  const MultiDimensionalStrategy dp({{"data", std::make_shared<DataParallelStrategy>()}}, data4);
  const SpecResolution batch =
      dp.get_combined_partition_spec("x", {"batch", "sequence", "hidden"}, Shape{6, 8, 16});
  EXPECT_EQ(batch.spec, (P{None, None, None}));
  EXPECT_THAT(batch.dropped_axes, ElementsAre("data"));
  EXPECT_THAT(batch.notes,
              ElementsAre("x: axis 'data' dropped: dimension 0 (batch) has size 6, not "
                          "divisible by 4 shards of ('data')"));

  const ParallelismConfig fsdp4 = ParallelismConfig::from_sharding_config(
      ShardingConfig{.fsdp_enabled = true, .fsdp_min_weight_size = 1024, .fsdp_parallel_size = 4});
  const auto replicate = std::make_shared<FSDPStrategy>("fsdp", std::nullopt, 1024);
  const MultiDimensionalStrategy fsdp({{"fsdp", replicate}}, fsdp4);
  const SpecResolution weight =
      fsdp.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{1026, 768});
  EXPECT_EQ(trimmed(weight.spec), replicate->apply_sharding({1026, 768}, fsdp4.to_mesh()).spec());
  EXPECT_THAT(weight.dropped_axes, ElementsAre("fsdp"));

  // With the fallback that asks for it, FSDP moves to the next dimension it divides.
  const auto other = std::make_shared<FSDPStrategy>("fsdp", std::nullopt, 1024,
                                                    FsdpFallback::kShardOtherDimension);
  const MultiDimensionalStrategy moving({{"fsdp", other}}, fsdp4);
  const SpecResolution moved =
      moving.get_combined_partition_spec("w", {"out_features", "in_features"}, Shape{1026, 768});
  EXPECT_EQ(moved.spec, (P{None, "fsdp"}));
  EXPECT_EQ(moved.spec, other->apply_sharding({1026, 768}, fsdp4.to_mesh()).spec());
  EXPECT_THAT(moved.notes, ElementsAre("w: axis 'fsdp' moved from dimension 0 to dimension 1: "
                                       "dimension 0 (out_features) has size 1026, not divisible "
                                       "by 4 shards of ('fsdp')"));
}

// Strategies that claim different dimensions combine to the union of their own specs.
TEST(SpecAgreement, ACombinationBehavesLikeItsPartsWithoutConflict) {
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4});
  const auto dp = std::make_shared<DataParallelStrategy>();
  const auto tp = std::make_shared<TensorParallelStrategy>("model", std::nullopt, "out_features");
  const MultiDimensionalStrategy both({{"data", dp}, {"tensor", tp}}, config);
  for (const LogicalAxes& names : shipped_namings()) {
    const PartitionSpec a = dp->get_partition_spec(names);
    const PartitionSpec b = tp->get_partition_spec(names);
    std::vector<SpecEntry> merged(names.size());
    for (std::size_t d = 0; d < names.size(); ++d) {
      ASSERT_TRUE(a.entry(d).is_replicated() || b.entry(d).is_replicated());
      merged[d] = a.entry(d).is_replicated() ? b.entry(d) : a.entry(d);
    }
    EXPECT_EQ(both.get_combined_partition_spec("t", names).spec, PartitionSpec(merged));
  }
}

TEST(SpecAgreement, CreatePartitionSpecKeepsTheLargestDividingPrefix) {
  const ParallelismConfig config =
      ParallelismConfig::from_sharding_config(ShardingConfig{.tensor_parallel_size = 2,
                                                             .fsdp_enabled = true,
                                                             .fsdp_min_weight_size = 0,
                                                             .fsdp_parallel_size = 2});
  const MultiDimensionalStrategy strategies = default_strategies(config);
  const ParameterNameRules rules(
      std::vector<ParameterRule>{{R"(^w$)", {"out_features", "in_features"}}});
  // 6 rows take 'model' (2) but not ('model', 'fsdp') (4); 'fsdp' moves to the columns.
  const ParameterPlacement six = strategies.create_partition_spec({6, 4}, "w", rules, 1);
  EXPECT_EQ(six.spec, (P{"model", "fsdp"}));
  EXPECT_THAT(six.notes, ElementsAre("w: axis 'fsdp' moved from dimension 0 to dimension 1: "
                                     "dimension 0 (out_features) has size 6, not divisible by 4 "
                                     "shards of ('model', 'fsdp')"));
  // With no column that takes it, 'fsdp' is dropped, and said to be.
  const ParameterPlacement odd = strategies.create_partition_spec({6, 3}, "w", rules, 1);
  EXPECT_EQ(odd.spec, (P{"model", None}));
  EXPECT_THAT(odd.dropped_axes, ElementsAre("fsdp"));
  EXPECT_THAT(odd.notes, ::testing::SizeIs(1));
  PlacementOptions strict;
  strict.strict = true;
  EXPECT_THROW((void)strategies.create_partition_spec({6, 3}, "w", rules, 1, strict),
               ShardingError);
  EXPECT_THAT(strategies.create_partition_spec({8, 4}, "w", rules, 1).notes, IsEmpty());
}

}  // namespace
}  // namespace shardwise
