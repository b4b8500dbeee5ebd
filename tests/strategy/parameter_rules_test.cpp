#include "shardwise/strategy/parameter_rules.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

TEST(ParameterNameRules, DefaultsCoverGpt2AndLlama) {
  const ParameterNameRules rules = ParameterNameRules::defaults();
  for (const ModelManifest& manifest :
       {gpt2_manifest(Gpt2Config{.n_layer = 2}),
        gpt2_manifest(Gpt2Config{.n_layer = 2, .tie_word_embeddings = false}),
        llama_manifest(
            LlamaConfig{.num_hidden_layers = 2, .attention_bias = true, .mlp_bias = true})}) {
    for (const ParameterInfo& p : manifest.parameters) {
      EXPECT_TRUE(rules.logical_axes_for(p.name, p.shape.size()).has_value()) << p.name;
    }
  }
  using Axes = std::optional<LogicalAxes>;
  EXPECT_EQ(rules.logical_axes_for("transformer.h.3.attn.c_attn.weight", 2),
            (Axes{{"embed", "heads"}}));
  EXPECT_EQ(rules.logical_axes_for("transformer.h.3.attn.c_proj.weight", 2),
            (Axes{{"heads", "embed"}}));
  EXPECT_EQ(rules.logical_axes_for("transformer.h.3.mlp.c_proj.weight", 2),
            (Axes{{"mlp", "embed"}}));
  EXPECT_EQ(rules.logical_axes_for("transformer.h.3.mlp.c_proj.bias", 1), (Axes{{"embed"}}));
  EXPECT_EQ(rules.logical_axes_for("model.layers.0.self_attn.k_proj.weight", 2),
            (Axes{{"kv_heads", "embed"}}));
  EXPECT_EQ(rules.logical_axes_for("model.layers.0.mlp.down_proj.weight", 2),
            (Axes{{"embed", "mlp"}}));
  EXPECT_EQ(rules.logical_axes_for("model.norm.weight", 1), (Axes{{"norm"}}));
  EXPECT_EQ(rules.logical_axes_for("transformer.ln_f.bias", 1), (Axes{{"norm"}}));
  EXPECT_EQ(rules.logical_axes_for("model.layers.0.input_layernorm.weight", 1), (Axes{{"norm"}}));
  EXPECT_EQ(rules.logical_axes_for("something.else", 3), std::nullopt);
}

TEST(ParameterNameRules, FirstMatchWinsAndRankMustFit) {
  const ParameterNameRules rules({{R"(attn\.)", {"heads", "embed"}}, {R"(\.weight$)", {"x", "y"}}});
  EXPECT_EQ(rules.logical_axes_for("layers.1.attn.qkv.weight", 2), (LogicalAxes{"heads", "embed"}));
  EXPECT_EQ(rules.logical_axes_for("layers.1.mlp.weight", 2), (LogicalAxes{"x", "y"}));
  EXPECT_THAT(error_of([&] { (void)rules.logical_axes_for("layers.1.attn.bias", 1); }),
              HasSubstr("parameter 'layers.1.attn.bias' of rank 1 matches rule 'attn\\.', which "
                        "gives 2 logical axes"));
}

TEST(ParameterNameRules, StagesFromLayerIndices) {
  const ParameterNameRules rules = ParameterNameRules::defaults();
  const auto counts = PipelineParallelStrategy(4).assign_layers_to_stages(10);  // 3, 3, 2, 2
  EXPECT_EQ(rules.layer_index("model.layers.7.mlp.up_proj.weight"), 7);
  EXPECT_EQ(rules.layer_index("model.norm.weight"), std::nullopt);
  EXPECT_EQ(rules.stage_of("model.layers.0.mlp.up_proj.weight", counts), 0);
  EXPECT_EQ(rules.stage_of("model.layers.2.mlp.up_proj.weight", counts), 0);
  EXPECT_EQ(rules.stage_of("model.layers.3.mlp.up_proj.weight", counts), 1);
  EXPECT_EQ(rules.stage_of("model.layers.7.mlp.up_proj.weight", counts), 2);
  EXPECT_EQ(rules.stage_of("model.layers.9.mlp.up_proj.weight", counts), 3);
  EXPECT_EQ(rules.stage_of("transformer.h.9.ln_1.weight", counts), 3);
  EXPECT_EQ(rules.stage_of("model.embed_tokens.weight", counts), 0);
  EXPECT_EQ(rules.stage_of("transformer.wpe.weight", counts), 0);
  EXPECT_EQ(rules.stage_of("model.norm.weight", counts), 3);
  EXPECT_EQ(rules.stage_of("lm_head.weight", counts), 3);
  EXPECT_EQ(rules.stage_of("transformer.ln_f.weight", counts), 3);
  // Not the reference's hard-coded 24 layers: any count works.
  EXPECT_EQ(rules.stage_of("layers.99.w", PipelineParallelStrategy(2).assign_layers_to_stages(100)),
            1);
  EXPECT_THAT(error_of([&] { (void)rules.stage_of("model.layers.10.w", counts); }),
              HasSubstr("is in layer 10 but the stages hold 10 layers"));
  EXPECT_THAT(error_of([&] { (void)rules.stage_of("rotary.inv_freq", counts); }),
              HasSubstr("has no layer index and matches neither"));
}

TEST(ParameterNameRules, HostileNamesMatchInLinearTime) {
  // A pattern that backtracking engines take exponential time on, and a long hostile name.
  const ParameterNameRules rules(std::vector<ParameterRule>{{R"(^(a+)+$)", {"x"}}});
  const std::string hostile = std::string(100000, 'a') + "!";
  EXPECT_EQ(rules.logical_axes_for(hostile, 1), std::nullopt);
  EXPECT_EQ(rules.logical_axes_for(std::string(100000, 'a'), 1), (LogicalAxes{"x"}));
}

TEST(ParameterNameRules, JsonAndErrors) {
  const ParameterNameRules rules = ParameterNameRules::from_json(R"({
    "parameter_rules": [{"pattern": "proj\\.weight$", "logical_axes": ["mlp", null]}],
    "stage_rules": {"layer_pattern": "blk(\\d+)_"}})");
  EXPECT_EQ(rules.logical_axes_for("up_proj.weight", 2), (LogicalAxes{"mlp", ""}));
  EXPECT_EQ(rules.layer_index("blk12_w"), 12);
  EXPECT_THAT(error_of([] {
                ParameterNameRules(std::vector<ParameterRule>{{"(unclosed", {"x"}}});
              }),
              HasSubstr("parameter rule 0 pattern '(unclosed' is not a valid regular expression"));
  EXPECT_THAT(error_of([] { ParameterNameRules({}, StageRules{.layer_pattern = "layers"}); }),
              HasSubstr("has no capture group"));
  EXPECT_THAT(error_of([] { (void)ParameterNameRules::from_json(R"({"rules": []})"); }),
              HasSubstr("unknown field 'rules'"));
  EXPECT_THAT(error_of([] {
                (void)ParameterNameRules::from_json(R"({"parameter_rules": [{"pattern": "x"}]})");
              }),
              HasSubstr("missing required field 'parameter_rules[0].logical_axes'"));
}

}  // namespace
}  // namespace shardwise
