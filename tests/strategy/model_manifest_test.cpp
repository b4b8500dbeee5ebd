#include "shardwise/strategy/model_manifest.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

// Published parameter counts of real checkpoints.
TEST(ModelManifest, Gpt2CountsAreExact) {
  EXPECT_EQ(gpt2_manifest(Gpt2Config{}).num_parameters(), 124'439'808);  // gpt2
  EXPECT_EQ(gpt2_manifest(Gpt2Config{.n_embd = 1024, .n_layer = 24, .n_head = 16}).num_parameters(),
            354'823'168);  // gpt2-medium
  const ModelManifest small = gpt2_manifest(Gpt2Config{});
  EXPECT_EQ(small.parameters.size(), 2u + 12u * 12u + 2u);
  EXPECT_EQ(small.parameters[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_THAT(small.parameters[4].shape, ElementsAre(768, 2304));
  EXPECT_EQ(small.num_bytes(), 4 * 124'439'808LL);
  // Untied: a separate head.
  EXPECT_EQ(gpt2_manifest(Gpt2Config{.tie_word_embeddings = false}).num_parameters(),
            124'439'808 + 50257 * 768);
}

TEST(ModelManifest, LlamaFamilyCountsAreExact) {
  EXPECT_EQ(llama_manifest(LlamaConfig{}).num_parameters(), 6'738'415'616);  // Llama-2-7B
  EXPECT_EQ(
      llama_manifest(
          LlamaConfig{.vocab_size = 128256, .intermediate_size = 14336, .num_key_value_heads = 8})
          .num_parameters(),
      8'030'261'248);  // Llama-3-8B
  EXPECT_EQ(llama_manifest(LlamaConfig{.intermediate_size = 14336, .num_key_value_heads = 8})
                .num_parameters(),
            7'241'732'096);  // Mistral-7B
  EXPECT_EQ(llama_manifest(LlamaConfig{.hidden_size = 2048,
                                       .intermediate_size = 5632,
                                       .num_hidden_layers = 22,
                                       .num_key_value_heads = 4})
                .num_parameters(),
            1'100'048'384);  // TinyLlama-1.1B
  const ModelManifest m = llama_manifest(LlamaConfig{.num_key_value_heads = 8});
  EXPECT_EQ(m.parameters[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_THAT(m.parameters[2].shape, ElementsAre(1024, 4096));
}

TEST(ModelManifest, FromHfConfig) {
  const ModelManifest gpt2 = manifest_from_hf_config(R"({
    "model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
    "n_layer": 12, "n_head": 12, "n_inner": null, "activation_function": "gelu_new",
    "resid_pdrop": 0.1})");
  EXPECT_EQ(gpt2.num_parameters(), 124'439'808);
  const ModelManifest llama = manifest_from_hf_config(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "intermediate_size": 5632, "num_attention_heads": 32, "num_hidden_layers": 22,
    "num_key_value_heads": 4, "vocab_size": 32000, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "rms_norm_eps": 1e-05})");
  EXPECT_EQ(llama.num_parameters(), 1'100'048'384);
  EXPECT_EQ(llama.parameters[0].dtype, DType::kBF16);
  EXPECT_EQ(llama.num_bytes(), 2 * 1'100'048'384LL);
  // Without model_type, the keys tell.
  EXPECT_EQ(manifest_from_hf_config(R"({"vocab_size": 10, "n_embd": 4, "n_layer": 1, "n_head": 2})")
                .parameters.front()
                .name,
            "transformer.wte.weight");
  // Qwen2 has q, k, v biases.
  const ModelManifest qwen = manifest_from_hf_config(R"({"model_type": "qwen2", "vocab_size": 16,
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 1, "tie_word_embeddings": true})");
  EXPECT_EQ(qwen.parameters[2].name, "model.layers.0.self_attn.q_proj.bias");
}

TEST(ModelManifest, HfConfigErrorsNameTheKey) {
  EXPECT_THAT(error_of([] { (void)manifest_from_hf_config(R"({"model_type": "llama"})"); }),
              HasSubstr("llama config.json has no 'vocab_size'"));
  EXPECT_THAT(error_of([] { (void)manifest_from_hf_config(R"({"model_type": "t5"})"); }),
              HasSubstr("model_type 't5' is not supported"));
  EXPECT_THAT(error_of([] { (void)manifest_from_hf_config(R"({"d_model": 3})"); }),
              HasSubstr("no 'model_type'"));
  // JSON parsers keep the last of two equal keys; a model description refuses them.
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(
                    R"({"model_type": "gpt2", "n_layer": 1, "n_layer": 48, "n_embd": 8,
                        "n_head": 2, "vocab_size": 16})");
              }),
              HasSubstr("has the key \"n_layer\" twice in one object"));
  EXPECT_THAT(error_of([] {
                (void)ModelManifest::from_json(
                    R"({"parameters": [{"name": "w", "shape": [2], "shape": [4]}]})");
              }),
              HasSubstr("has the key \"shape\" twice"));
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(
                    R"({"vocab_size": 10, "n_embd": 5, "n_layer": 1, "n_head": 2})");
              }),
              HasSubstr("'n_embd' (5) is not divisible by 'n_head' (2)"));
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(
                    R"({"vocab_size": 10, "n_embd": 4, "n_layer": "2", "n_head": 2})");
              }),
              HasSubstr("field 'n_layer' must be an integer"));
  EXPECT_THAT(
      error_of([] {
        (void)llama_manifest(LlamaConfig{.num_attention_heads = 32, .num_key_value_heads = 5});
      }),
      HasSubstr("not a multiple of 'num_key_value_heads' (5)"));
  EXPECT_THAT(error_of([] { (void)gpt2_manifest(Gpt2Config{.n_layer = 0}); }),
              HasSubstr("GPT-2 config 'n_layer' is 0"));
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(R"({"model_type": "gpt2", "vocab_size": 10,
                  "n_embd": 4, "n_layer": 1, "n_head": 2, "torch_dtype": "float8"})");
              }),
              HasSubstr("dtype 'float8' is not one of"));
}

// As transformers reads a config.json: transformers 5's "dtype" (kept over "torch_dtype"), and
// the class's defaults for a size left out (MistralConfig's 8 key/value heads).
TEST(ModelManifest, HfConfigIsReadAsTransformersReadsIt) {
  const std::string llama = R"({"model_type": "llama", "vocab_size": 16, "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2)";
  EXPECT_EQ(manifest_from_hf_config(llama + R"(, "dtype": "bfloat16"})").parameters[0].dtype,
            DType::kBF16);
  EXPECT_EQ(manifest_from_hf_config(llama + R"(, "dtype": "float16", "torch_dtype": "float32"})")
                .parameters[0]
                .dtype,
            DType::kF16);
  const ModelManifest mistral = manifest_from_hf_config(R"({"model_type": "mistral",
    "vocab_size": 16, "hidden_size": 64, "intermediate_size": 16, "num_hidden_layers": 1,
    "num_attention_heads": 16})");
  EXPECT_EQ(mistral.parameters[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_THAT(mistral.parameters[2].shape, ElementsAre(8 * 4, 64));
}

// Bounded and checked as the models' readers bound them (tests/models/
// hf_config_agreement_test.cpp runs both over the same files).
TEST(ModelManifest, HfConfigSizesAreBoundedAsTheModelsReadersBoundThem) {
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(R"({"model_type": "gpt2", "vocab_size": 2097152,
                  "n_embd": 4, "n_layer": 1, "n_head": 2})");
              }),
              HasSubstr("GPT-2 config 'vocab_size' is 2097152; at most 1048576 is read"));
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(R"({"model_type": "llama", "vocab_size": 16,
                  "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "head_dim": 5})");
              }),
              HasSubstr("llama config's head_dim is 5; rotary embeddings rotate pairs"));
  EXPECT_THAT(error_of([] {
                (void)manifest_from_hf_config(R"({"model_type": "llama", "vocab_size": 16,
                  "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "max_position_embeddings": 0})");
              }),
              HasSubstr("llama config 'max_position_embeddings' is 0; expected >= 1"));
}

// A manifest file may carry the transformer's shape, so that a model planned from a file (the
// Python package's presets) is planned as its family states it; a shape no family could state
// is refused naming the field.
TEST(ModelManifest, TheTransformersShapeRoundTripsAndIsChecked) {
  TransformerShape shape;
  shape.layers = 2;
  shape.hidden = 64;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.head_dim = 16;
  shape.mlp_width = 96;
  shape.vocab = 128;
  shape.context = 32;
  shape.positions = PositionKind::kRotary;
  shape.norm = NormKind::kRmsNorm;
  shape.mlp = MlpKind::kGatedSilu;
  shape.qkv_bias = true;
  shape.qk_norm = true;
  ModelManifest manifest{{{"w", {4, 2}, DType::kF32, std::nullopt}}, {{"heads", 16}}, shape};
  const std::string json = manifest.to_json();
  EXPECT_THAT(json, HasSubstr(R"("positions":"rotary","norm":"rmsnorm","mlp":"gated_silu")"));
  EXPECT_EQ(ModelManifest::from_json(json), manifest);
  // Every field changes what is read back.
  manifest.transformer->tied_head = true;
  EXPECT_EQ(ModelManifest::from_json(manifest.to_json()).transformer, manifest.transformer);

  const auto with = [&](const std::string& from, const std::string& to) {
    std::string text = json;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return error_of([&] { (void)ModelManifest::from_json(text); });
  };
  EXPECT_THAT(with(R"("heads":4)", R"("heads":0)"), HasSubstr("transformer.heads is 0"));
  EXPECT_THAT(with(R"("kv_heads":2)", R"("kv_heads":3)"),
              HasSubstr("transformer.kv_heads (3) must divide transformer.heads (4)"));
  EXPECT_THAT(with(R"("norm":"rmsnorm")", R"("norm":"batchnorm")"),
              HasSubstr("transformer.norm is 'batchnorm'; expected one of layernorm, rmsnorm"));
  EXPECT_THAT(with(R"("qk_norm":true)", R"("qk_norm":1)"),
              HasSubstr("transformer.qk_norm must be true or false"));
  EXPECT_THAT(with(R"("qk_norm":true)", R"("qk_norm":true,"sliding":4)"),
              HasSubstr("transformer.sliding"));
  EXPECT_THAT(with(R"(,"tied_head":false)", ""), HasSubstr("tied_head"));
  EXPECT_THAT(with(R"("layers":2)", R"("layers":9223372036854775807)"),
              HasSubstr("transformer.layers is 9223372036854775807"));

  // A Mixture of Experts' routing round-trips; a dense shape's JSON names none of it.
  EXPECT_EQ(json.find("experts"), std::string::npos);
  manifest.transformer->experts = 8;
  manifest.transformer->experts_per_token = 2;
  manifest.transformer->expert_width = 24;
  manifest.transformer->renormalize_routing = true;
  const std::string moe = manifest.to_json();
  EXPECT_EQ(ModelManifest::from_json(moe).transformer, manifest.transformer);
  const auto with_moe = [&](const std::string& from, const std::string& to) {
    std::string text = moe;
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return error_of([&] { (void)ModelManifest::from_json(text); });
  };
  EXPECT_THAT(with_moe(R"("experts_per_token":2)", R"("experts_per_token":9)"),
              HasSubstr("transformer.experts_per_token is 9; expected 1 to 8"));
  EXPECT_THAT(with_moe(R"(,"expert_width":24)", ""), HasSubstr("expert_width"));
  EXPECT_THAT(with_moe(R"("mlp":"gated_silu")", R"("mlp":"gelu")"), HasSubstr("experts are gated"));
}

TEST(ModelManifest, JsonRoundTripAndErrors) {
  ModelManifest manifest{{{"w", {4, 2}, DType::kBF16, LogicalAxes{"embed", ""}},
                          {"b", {2}, DType::kF32, std::nullopt}},
                         {},
                         std::nullopt};
  EXPECT_EQ(
      manifest.to_json(),
      R"({"parameters":[{"name":"w","shape":[4,2],"dtype":"bf16","logical_axes":["embed",null]},{"name":"b","shape":[2],"dtype":"f32"}]})");
  EXPECT_EQ(ModelManifest::from_json(manifest.to_json()), manifest);
  EXPECT_EQ(load_model_description(manifest.to_json()), manifest);
  EXPECT_THAT(error_of([] {
                (void)ModelManifest::from_json(
                    R"({"parameters": [{"name": "w", "shape": [2], "size": 3}]})");
              }),
              HasSubstr("unknown field 'parameters[0].size'"));
  EXPECT_THAT(
      error_of([] {
        (void)ModelManifest::from_json(
            R"({"parameters": [{"name": "w", "shape": [2]}, {"name": "w", "shape": [3]}]})");
      }),
      HasSubstr("parameter 'w' appears twice"));
  EXPECT_THAT(
      error_of([] {
        (void)ModelManifest::from_json(R"({"parameters": [{"name": "w", "shape": [2, -1]}]})");
      }),
      HasSubstr("parameter 'w' dimension 1 has size -1"));
  EXPECT_THAT(error_of([] {
                (void)ModelManifest::from_json(
                    R"({"parameters": [{"name": "w", "shape": [2], "logical_axes": ["a", "b"]}]})");
              }),
              HasSubstr("parameter 'w' has 2 logical axes for shape (2,)"));
  EXPECT_THAT(
      error_of([] { (void)ModelManifest::from_json(R"({"parameters": [{"shape": [2]}]})"); }),
      HasSubstr("missing required field 'parameters[0].name'"));
}

}  // namespace
}  // namespace shardwise
