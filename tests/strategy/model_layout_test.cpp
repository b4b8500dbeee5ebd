#include "shardwise/strategy/model_layout.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/sharding_rules.hpp"

namespace shardwise {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using ::testing::Not;

const ParameterLayout& find(const ModelLayout& layout, const std::string& name) {
  for (const ParameterLayout& p : layout.parameters) {
    if (p.parameter.name == name) return p;
  }
  throw std::runtime_error("no parameter " + name);
}

// The default rules of the mesh's config, with FSDP splitting dimensions of any size (these
// models are small) unless told otherwise.
ModelLayout layout_with_defaults(const ModelManifest& manifest, const Mesh& mesh,
                                 Evenness evenness = Evenness::kStrict,
                                 std::int64_t fsdp_min_weight_size = 0) {
  ParallelismConfig config = ParallelismConfig::from_mesh(mesh);
  config.sharding_config.fsdp_min_weight_size = fsdp_min_weight_size;
  const ShardingRules rules = default_sharding_rules(config);
  LayoutOptions options;
  options.evenness = evenness;
  return layout_model(manifest, mesh, rules.axis_rules, rules.name_rules, options);
}

TEST(ModelLayout, LlamaOnAFourAxisMesh) {
  const ModelManifest manifest = llama_manifest(LlamaConfig{.vocab_size = 64,
                                                            .hidden_size = 16,
                                                            .intermediate_size = 32,
                                                            .num_hidden_layers = 4,
                                                            .num_attention_heads = 4,
                                                            .num_key_value_heads = 2});
  const Mesh mesh = Mesh::parse("data=2,fsdp=2,model=2,pipeline=2");
  const ModelLayout layout = layout_with_defaults(manifest, mesh);
  EXPECT_THAT(layout.layers_per_stage, ElementsAre(2, 2));
  const ParameterLayout& q = find(layout, "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(q.logical_axes, (LogicalAxes{"heads", "embed"}));
  EXPECT_EQ(q.spec, (P{"model", "fsdp"}));
  EXPECT_THAT(q.shard_shape, ElementsAre(8, 8));
  EXPECT_EQ(q.stage, 1);
  const ParameterLayout& down = find(layout, "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(down.spec, (P{"fsdp", "model"}));
  EXPECT_EQ(down.stage, 0);
  EXPECT_EQ(find(layout, "model.embed_tokens.weight").stage, 0);
  EXPECT_EQ(find(layout, "lm_head.weight").stage, 1);
  EXPECT_EQ(find(layout, "model.norm.weight").spec, P{None});
  EXPECT_TRUE(layout.notes.empty());

  // Bytes: every device of a stage holds 1/4 of each sharded matrix of the stage and all of
  // each replicated norm, in f32.
  std::int64_t stage0 = 0;
  for (const ParameterLayout& p : layout.parameters) {
    if (p.stage != 0) continue;
    std::int64_t held = num_elements(p.shard_shape);
    stage0 += held * 4;
  }
  EXPECT_EQ(layout.max_bytes_by_stage()[0], stage0);
  for (std::int64_t position = 0; position < mesh.size(); ++position) {
    const std::int64_t stage = mesh.coords_at(position)[3];
    EXPECT_EQ(layout.bytes_per_device[static_cast<std::size_t>(position)],
              layout.max_bytes_by_stage()[static_cast<std::size_t>(stage)]);
  }
  // All stages' bytes together, times the 8 devices per stage over 4-way sharding (2 for the
  // replicas of 'data'), cover the model: sharded matrices 4-way, norms 8 times.
  std::int64_t total = 0;
  for (std::int64_t b : layout.bytes_per_device) total += b;
  std::int64_t expected = 0;
  for (const ParameterLayout& p : layout.parameters) {
    expected += num_elements(p.shard_shape) * 4 * 8;
  }
  EXPECT_EQ(total, expected);
}

TEST(ModelLayout, NonDivisibleAxesAreDroppedAndReported) {
  // GPT-2's vocabulary (50257) does not divide over 2 'model' shards.
  const ModelManifest manifest = gpt2_manifest(Gpt2Config{.n_layer = 2});
  const Mesh mesh = Mesh::parse("fsdp=2,model=2");
  const ModelLayout layout = layout_with_defaults(manifest, mesh);
  const ParameterLayout& wte = find(layout, "transformer.wte.weight");
  EXPECT_EQ(wte.spec, (P{None, "fsdp"}));
  EXPECT_THAT(layout.notes,
              Contains("transformer.wte.weight: axis 'model' dropped: dimension 0 (vocab) has size "
                       "50257, not divisible by 2 shards of ('model')"));
  // Uneven keeps the axis, with torch.chunk shards.
  const ModelLayout uneven = layout_with_defaults(manifest, mesh, Evenness::kUneven);
  EXPECT_EQ(find(uneven, "transformer.wte.weight").spec, (P{"model", "fsdp"}));
  EXPECT_THAT(find(uneven, "transformer.wte.weight").shard_shape, ElementsAre(25129, 384));
}

TEST(ModelLayout, FsdpLeavesDimensionsBelowItsMinimumWhole) {
  // GPT-2 small's 768-wide embedding is below the reference's default of 1024: FSDP leaves it
  // whole while tensor parallelism still splits the vocabulary-free dimensions.
  const ModelManifest manifest = gpt2_manifest(Gpt2Config{.n_layer = 1});
  const Mesh mesh = Mesh::parse("fsdp=2,model=2");
  const ModelLayout layout = layout_with_defaults(manifest, mesh, Evenness::kStrict, 1024);
  EXPECT_EQ(find(layout, "transformer.h.0.mlp.c_fc.weight").spec, (P{None, "model"}));
  EXPECT_EQ(find(layout, "transformer.wte.weight").spec, (P{None, None}));
  const ModelLayout all = layout_with_defaults(manifest, mesh, Evenness::kStrict, 768);
  EXPECT_EQ(find(all, "transformer.h.0.mlp.c_fc.weight").spec, (P{"fsdp", "model"}));
}

// An axis whose rules name dimensions the model has, but that splits none of them, is noted with
// the reason; the data axis, which splits batches and no parameter, is not.
TEST(ModelLayout, AnAxisThatSplitsNoParameterSaysWhy) {
  const ModelManifest manifest = gpt2_manifest(Gpt2Config{.n_layer = 1});
  const ModelLayout layout =
      layout_with_defaults(manifest, Mesh::parse("fsdp=8"), Evenness::kStrict, 1024);
  EXPECT_THAT(layout.axis_notes,
              Contains(AllOf(HasSubstr("mesh axis 'fsdp' (8 devices) splits no parameter"),
                             HasSubstr("only where they have at least 1024 elements"),
                             HasSubstr("the largest such dimension has 768"))));
  EXPECT_THAT(
      layout_with_defaults(manifest, Mesh::parse("fsdp=8"), Evenness::kStrict, 768).axis_notes,
      Not(Contains(HasSubstr("splits no parameter"))));
  // 7 divides no dimension of the model: dropped everywhere, and said so once more in sum.
  EXPECT_THAT(layout_with_defaults(manifest, Mesh::parse("fsdp=7")).axis_notes,
              Contains(AllOf(HasSubstr("mesh axis 'fsdp' (7 devices) splits no parameter"),
                             HasSubstr("which it does not divide"))));
  EXPECT_THAT(layout_with_defaults(manifest, Mesh::parse("data=8")).axis_notes,
              Not(Contains(HasSubstr("splits no parameter"))));
}

TEST(ModelLayout, ManifestAxesWinAndUnnamedParametersAreReported) {
  const ModelManifest manifest{{{"custom", {8, 8}, DType::kBF16, LogicalAxes{"", "mlp"}},
                                {"mystery", {8}, DType::kF32, std::nullopt}},
                               {},
                               std::nullopt};
  const Mesh mesh = Mesh::parse("model=4");
  const ModelLayout layout = layout_with_defaults(manifest, mesh);
  EXPECT_EQ(find(layout, "custom").spec, (P{None, "model"}));
  EXPECT_THAT(layout.notes, ElementsAre("mystery: no parameter rule names it: replicated"));
  EXPECT_EQ(layout.max_bytes_per_device(), 8 * 2 * 2 + 8 * 4);
}

TEST(ModelLayout, Errors) {
  const ModelManifest manifest = gpt2_manifest(Gpt2Config{.n_layer = 2});
  EXPECT_THAT(error_of([&] { (void)layout_with_defaults(manifest, Mesh::parse("pipeline=4")); }),
              HasSubstr("2 layers cannot fill 4 pipeline stages"));
  const LogicalAxisRules into_pipeline(std::vector<LogicalAxisRule>{{"embed", {"pipeline"}}});
  EXPECT_THAT(error_of([&] {
                (void)layout_model(manifest, Mesh::parse("pipeline=2"), into_pipeline,
                                   ParameterNameRules::defaults());
              }),
              HasSubstr("over the pipeline axis 'pipeline', which places layers"));
  EXPECT_THAT(error_of([&] { (void)layout_with_defaults(manifest, Mesh::parse("context=2")); }),
              HasSubstr("mesh axis 'context' is not one of data, fsdp, expert, model, pipeline"));
}

TEST(ShardingRules, FileWithDefaultsForMissingParts) {
  const ParallelismConfig config = ParallelismConfig::from_mesh(Mesh::parse("data=2,model=2"));
  const ShardingRules only_axes =
      load_sharding_rules(R"({"logical_axis_rules": [["embed", "model"]]})", config);
  EXPECT_EQ(only_axes.axis_rules.rules().size(), 1u);
  EXPECT_EQ(only_axes.name_rules.rules().size(), ParameterNameRules::defaults().rules().size());
  const ShardingRules only_stages =
      load_sharding_rules(R"json({"stage_rules": {"layer_pattern": "blk(\\d+)"}})json", config);
  EXPECT_EQ(only_stages.name_rules.layer_index("blk3.w"), 3);
  EXPECT_FALSE(only_stages.name_rules.rules().empty());
  EXPECT_THAT(error_of([&] { (void)load_sharding_rules(R"({"logical_axis_rules": 3})", config); }),
              HasSubstr("field 'logical_axis_rules' must be a list"));
  EXPECT_THAT(error_of([&] { (void)load_sharding_rules(R"({"axis_rules": []})", config); }),
              HasSubstr("unknown field 'axis_rules'"));
}

}  // namespace
}  // namespace shardwise
