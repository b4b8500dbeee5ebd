#include "shardwise/strategy/multi_dimensional_strategy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/data_parallel_strategy.hpp"
#include "shardwise/strategy/expert_parallel_strategy.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/model_manifest.hpp"
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

// An expert axis (not in the reference): the default strategies put a stacked expert weight's
// experts on it, split the batch over it after the data axes, and leave the router alone; a
// ShardingConfig's expert degree round-trips through JSON, and its mesh orders the axis between
// fsdp and model.
TEST(MultiDimensionalStrategy, AnExpertAxisSplitsTheExpertsAndTheBatch) {
  const ShardingConfig config{.data_parallel_size = 2,
                              .tensor_parallel_size = 1,
                              .fsdp_enabled = true,
                              .fsdp_min_weight_size = 4,
                              .fsdp_parallel_size = 2,
                              .expert_parallel_size = 4};
  EXPECT_EQ(config.get_total_device_count(), 16);
  EXPECT_EQ(ShardingConfig::from_json(config.to_json()), config);
  EXPECT_EQ(ShardingConfig::from_json(ShardingConfig{}.to_json()).expert_parallel_size, 1);
  const ParallelismConfig parallelism = ParallelismConfig::from_sharding_config(config);
  EXPECT_EQ(parallelism.mesh_axis_names, (std::vector<std::string>{"data", "fsdp", "expert"}));
  const MultiDimensionalStrategy strategy = default_strategies(parallelism);
  EXPECT_EQ(strategy.get_combined_partition_spec("x", {"batch", "sequence", "embed"}).spec,
            (P{{"data", "fsdp", "expert"}, None, None}));
  EXPECT_EQ(strategy
                .get_combined_partition_spec("model.layers.0.mlp.experts.gate_up_proj",
                                             {"experts", "mlp", "embed"}, Shape{8, 64, 32})
                .spec,
            (P{"expert", None, "fsdp"}));
  EXPECT_EQ(strategy
                .get_combined_partition_spec("model.layers.0.mlp.gate.weight", {"router", "embed"},
                                             Shape{8, 32})
                .spec,
            (P{None, "fsdp"}));
  // With a model axis the experts fold over it too, model major (the trainer's placement), and
  // the experts' inner axes stay whole.
  const MultiDimensionalStrategy folded =
      default_strategies(ParallelismConfig::from_sharding_config(
          ShardingConfig{.tensor_parallel_size = 2, .expert_parallel_size = 2}));
  EXPECT_EQ(folded
                .get_combined_partition_spec("model.layers.0.mlp.experts.gate_up_proj",
                                             {"experts", "expert_mlp", "embed"}, Shape{8, 64, 32})
                .spec,
            (P{{"model", "expert"}, None, None}));
  EXPECT_EQ(ParallelismConfig::from_mesh(Mesh::parse("data=2,expert=4")).sharding_config,
            (ShardingConfig{.data_parallel_size = 2, .expert_parallel_size = 4}));
  const ExpertParallelStrategy alone;
  EXPECT_EQ(alone.kind(), StrategyKind::kExpertParallel);
  EXPECT_EQ(to_string(alone.kind()), "expert_parallel");
  EXPECT_EQ(alone.apply_sharding(Shape{8, 4}, Mesh::parse("expert=4")).spec(), (P{"expert"}));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json(R"({"expert_parallel_size": 0})"); }),
              HasSubstr("ShardingConfig.expert_parallel_size is 0"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig c = ParallelismConfig::from_mesh(Mesh::parse("expert=2"));
                c.sharding_config.expert_parallel_size = 4;
                c.validate();
              }),
              HasSubstr("needs 4"));
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

TEST(MultiDimensionalStrategy, ValidatesStrategiesAgainstTheMeshWhenBuilt) {
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 2, .pipeline_parallel_size = 4});
  // from_sharding_config puts 'pipeline' first: Mesh('pipeline': 4, 'data': 2).
  EXPECT_THAT(
      error_of([&] {
        MultiDimensionalStrategy({{"pp", std::make_shared<PipelineParallelStrategy>(2)}}, config);
      }),
      HasSubstr("strategy 'pp' has 2 pipeline stages, but axis 'pipeline' of "
                "Mesh('pipeline': 4, 'data': 2) has size 4"));
  EXPECT_THAT(error_of([&] {
                MultiDimensionalStrategy(
                    {{"dp", std::make_shared<DataParallelStrategy>("data", 0)}}, config);
              }),
              HasSubstr("strategy 'dp' was built for axis 'data' at mesh axis 0, but "
                        "Mesh('pipeline': 4, 'data': 2) has it at mesh axis 1"));
  EXPECT_NO_THROW(MultiDimensionalStrategy(
      {{"pp", std::make_shared<PipelineParallelStrategy>(4, "pipeline", 0)},
       {"dp", std::make_shared<DataParallelStrategy>("data", 1)}},
      config));
}

// Grouped-query attention: 2 key/value heads cannot be split over 4 tensor-parallel ranks
// without splitting inside a head, so k_proj and v_proj stay whole on every rank (each rank
// holds both heads; Megatron-LM and vLLM hold the one a rank needs, which a PartitionSpec over
// 'model' cannot express), with a note; strict mode refuses.
TEST(MultiDimensionalStrategy, GroupedQueryAttentionNeverSplitsAHead) {
  const ModelManifest llama = llama_manifest(LlamaConfig{.vocab_size = 128,
                                                         .hidden_size = 64,
                                                         .intermediate_size = 128,
                                                         .num_hidden_layers = 2,
                                                         .num_attention_heads = 8,
                                                         .num_key_value_heads = 2});
  EXPECT_EQ(llama.axis_units, (AxisUnits{{"heads", 8}, {"kv_heads", 8}}));
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4});
  const MultiDimensionalStrategy strategies = default_strategies(config);
  const ParameterNameRules rules = ParameterNameRules::defaults();
  PlacementOptions options;
  options.units = llama.axis_units;
  const auto place = [&](const std::string& name) {
    for (const ParameterInfo& p : llama.parameters) {
      if (p.name == name) return strategies.create_partition_spec(p.shape, name, rules, 2, options);
    }
    throw std::runtime_error("no parameter " + name);
  };
  EXPECT_EQ(place("model.layers.0.self_attn.q_proj.weight").spec, (P{"model", None}));
  EXPECT_EQ(place("model.layers.0.self_attn.o_proj.weight").spec, (P{None, "model"}));
  const ParameterPlacement k = place("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(k.spec, (P{None, None}));
  EXPECT_THAT(k.notes, ElementsAre("model.layers.0.self_attn.k_proj.weight: axis 'model' dropped: "
                                   "dimension 0 (kv_heads) has 2 units of 8 elements, not "
                                   "divisible by 4 shards of ('model')"));
  EXPECT_EQ(place("model.layers.0.self_attn.v_proj.weight").spec, (P{None, None}));
  // Units are what tell a head's size: without them the 16 rows split into quarter heads.
  // The manifest generators always give them.
  options.units.clear();
  EXPECT_EQ(place("model.layers.0.self_attn.k_proj.weight").spec, (P{"model", None}));
  options.units = llama.axis_units;
  options.strict = true;
  EXPECT_THAT(error_of([&] { (void)place("model.layers.0.self_attn.k_proj.weight"); }),
              HasSubstr("2 units of 8 elements, not divisible by 4 shards of ('model') (strict"));
  // Two tensor-parallel ranks hold one key/value head each.
  const MultiDimensionalStrategy two = default_strategies(ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 4, .tensor_parallel_size = 2}));
  PlacementOptions units;
  units.units = llama.axis_units;
  EXPECT_EQ(
      two.create_partition_spec({16, 64}, "model.layers.0.self_attn.k_proj.weight", rules, 2, units)
          .spec,
      (P{"model", None}));
  // A layer count no model has is refused, pipeline or not.
  EXPECT_THAT(error_of([&] {
                (void)two.create_partition_spec({16, 64}, "w", rules, -1);
              }),
              HasSubstr("num_layers is -1"));
}

}  // namespace
}  // namespace shardwise
