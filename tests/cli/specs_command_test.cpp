#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_command;
using testing::source_path;

TEST(SpecsCommand, ReportForAManifest) {
  const auto r =
      run_command({"specs", "--model", source_path("examples/models/tiny_manifest.json"), "--mesh",
                   "data=2,fsdp=2,model=2,pipeline=2", "--fsdp-min-weight-size", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "mesh        Mesh('data': 2, 'fsdp': 2, 'model': 2, 'pipeline': 2)\n"
            "parameters  11 tensors, 131,136 elements, 262,400 bytes\n"
            "stages      0: layer 0, 1: layer 1\n"
            "\n"
            "name                      shape      dtype  logical axes  spec                shard "
            "shape  stage\n"
            "embed.weight              (256, 64)  bf16   vocab, embed  P('model', 'fsdp')  (128, "
            "32)    0\n"
            "layers.0.attn.qkv.weight  (192, 64)  bf16   heads, embed  P('model', 'fsdp')  (96, "
            "32)     0\n"
            "layers.0.attn.out.weight  (64, 64)   bf16   embed, heads  P('fsdp', 'model')  (32, "
            "32)     0\n"
            "layers.0.mlp.up.weight    (256, 64)  bf16   mlp, embed    P('model', 'fsdp')  (128, "
            "32)    0\n"
            "layers.0.mlp.down.weight  (64, 256)  bf16   embed, mlp    P('fsdp', 'model')  (32, "
            "128)    0\n"
            "layers.1.attn.qkv.weight  (192, 64)  bf16   heads, embed  P('model', 'fsdp')  (96, "
            "32)     1\n"
            "layers.1.attn.out.weight  (64, 64)   bf16   embed, heads  P('fsdp', 'model')  (32, "
            "32)     1\n"
            "layers.1.mlp.up.weight    (256, 64)  bf16   mlp, embed    P('model', 'fsdp')  (128, "
            "32)    1\n"
            "layers.1.mlp.down.weight  (64, 256)  bf16   embed, mlp    P('fsdp', 'model')  (32, "
            "128)    1\n"
            "norm.weight               (64,)      f32    norm          P(None)             (64,)   "
            "     1\n"
            "lm_head.weight            (256, 64)  bf16   vocab, embed  P('model', 'fsdp')  (128, "
            "32)    1\n"
            "\n"
            "parameter bytes per device\n"
            "  stage 0  32,768\n"
            "  stage 1  33,024\n"
            "  largest  33,024\n");
}

TEST(SpecsCommand, JsonForAConfig) {
  const auto r = run_command({"specs", "--model", source_path("examples/models/tinyllama.json"),
                              "--mesh", "data=2,model=4,pipeline=2", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["parameters"].size(), 1u + 22u * 9u + 2u);
  EXPECT_EQ(json["layers_per_stage"], nlohmann::json({11, 11}));
  const auto& k = json["parameters"][2];
  EXPECT_EQ(k, nlohmann::json::parse(R"json({"name": "model.layers.0.self_attn.k_proj.weight",
      "shape": [256, 2048], "dtype": "bf16", "logical_axes": ["kv_heads", "embed"],
      "spec": "P('model', None)", "shard_shape": [64, 2048], "held_shape": [64, 2048],
      "stage": 0})json"));
  // bf16 parameters, 4-way tensor parallel on each of 2 stages: every device of stage s holds
  // a quarter of each sharded weight and all of each norm.
  std::int64_t stage1 = 0;
  for (const auto& p : json["parameters"]) {
    if (p["stage"] != 1) continue;
    std::int64_t elements = 1;
    for (const auto& size : p["shard_shape"]) elements *= size.get<std::int64_t>();
    stage1 += elements * (p["dtype"] == "bf16" ? 2 : 4);
  }
  EXPECT_EQ(json["bytes_per_device"]["by_stage"][1], stage1);
  EXPECT_EQ(json["bytes_per_device"]["by_device"].size(), 16u);
}

TEST(SpecsCommand, RulesFileAndFsdpOverData) {
  auto r = run_command({"specs", "--model", source_path("examples/models/tiny_manifest.json"),
                        "--mesh", "data=2,fsdp=2,model=2,pipeline=2", "--rules",
                        source_path("examples/models/maxtext_style_rules.json"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["parameters"][0]["spec"], "P('model', 'fsdp')");
  r = run_command({"specs", "--model", source_path("examples/models/tiny_manifest.json"), "--mesh",
                   "data=4", "--fsdp", "--fsdp-min-weight-size", "64", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["parameters"][1]["spec"], "P(None, 'data')");
}

TEST(SpecsCommand, NotesSayWhatWasDropped) {
  const auto r = run_command(
      {"specs", "--model", source_path("examples/models/gpt2.json"), "--mesh", "fsdp=2,model=2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("notes\n  transformer.wte.weight: axis 'model' dropped: dimension 0 "
                               "(vocab) has size 50257, not divisible by 2 shards of ('model')\n"));
}

// GPT-2 on fsdp=8 with the reference's min_weight_size 1024 shards nothing: said, with the flag
// that changes it; with that flag, it shards.
TEST(SpecsCommand, AnFsdpAxisThatShardsNothingNamesTheFlag) {
  const auto r = run_command({"specs", "--model", "gpt2", "--mesh", "fsdp=8"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mesh axis 'fsdp' (8 devices) splits no parameter"));
  EXPECT_THAT(r.out, HasSubstr("FSDP leaves whole every dimension below --fsdp-min-weight-size "
                               "(1024): give a smaller size to shard this model over 'fsdp'"));
  const auto lower = run_command(
      {"specs", "--model", "gpt2", "--mesh", "fsdp=8", "--fsdp-min-weight-size", "768"});
  ASSERT_EQ(lower.status, 0) << lower.err;
  EXPECT_THAT(lower.out, Not(HasSubstr("splits no parameter")));
  EXPECT_THAT(lower.out, Not(HasSubstr("--fsdp-min-weight-size")));
}

TEST(SpecsCommand, GroupedQueryAttentionKeepsHeadsWholeOrRefuses) {
  // TinyLlama has 4 key/value heads of 64: 8 tensor-parallel ranks cannot split them.
  const std::vector<std::string> args{
      "specs", "--model", source_path("examples/models/tinyllama.json"), "--mesh", "model=8"};
  const auto r = run_command(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("model.layers.0.self_attn.k_proj.weight: axis 'model' dropped: "
                               "dimension 0 (kv_heads) has 4 units of 64 elements, not divisible "
                               "by 8 shards of ('model')"));
  std::vector<std::string> strict = args;
  strict.push_back("--strict");
  testing::expect_bad_input(strict, "not divisible by 8 shards of ('model') (strict layout)");
}

TEST(SpecsCommand, BadInput) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--model", "/nonexistent.json", "--mesh", "data=2"},
            "--model: '/nonexistent.json' is neither a model (tiny, small, gpt2, llama-tiny, "
            "smollm2-135m, qwen2-tiny, qwen3-tiny, mixtral-tiny, qwen3-moe-tiny) nor a readable "
            "file"},
           {{"--model", source_path("examples/models/gpt2.json"), "--mesh", "context=2"},
            "mesh axis 'context' is not one of data, fsdp, expert, model, pipeline"},
           {{"--model", source_path("examples/models/gpt2.json"), "--mesh", "pipeline=16"},
            "12 layers cannot fill 16 pipeline stages"},
           {{"--model", source_path("examples/models/gpt2.json"), "--mesh", "data=2", "--rules",
             source_path("examples/models/gpt2.json")},
            "unknown field 'activation_function'"},
           {{"--model", source_path("CMakeLists.txt"), "--mesh", "data=2"},
            "invalid JSON in --model"},
       }) {
    std::vector<std::string> full{"specs"};
    full.insert(full.end(), args.begin(), args.end());
    testing::expect_bad_input(full, message);
  }
}

}  // namespace
}  // namespace shardwise::cli
