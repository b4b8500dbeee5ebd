// The planner's reading of a config.json (manifest_from_hf_config) and the models' (the family's
// Hugging Face adapter) accept the same files, with the same sizes, and refuse the same hostile
// ones. Where they differ, it is by design and listed here: the planner counts what a model holds,
// so it plans configs whose computation the trainer does not implement (a sliding window, biases,
// another activation: the models' reader refuses those naming the field), and it reads a
// hand-written description without "model_type" by its keys.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "hf_config_fixtures.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise {
namespace {

// What a reader made of a file: its parameters' element counts by name, or its refusal.
struct Reading {
  std::map<std::string, std::int64_t> elements;
  std::string refusal;
  [[nodiscard]] bool accepted() const { return refusal.empty(); }
};

std::map<std::string, std::int64_t> elements_of(const ModelManifest& manifest) {
  std::map<std::string, std::int64_t> elements;
  for (const ParameterInfo& p : manifest.parameters) elements[p.name] = num_elements(p.shape);
  return elements;
}

Reading by_models(const std::string& text) {
  Reading reading;
  try {
    std::vector<std::string> notes;
    reading.elements =
        elements_of(models::read_hf_config(text, "'config.json'", notes)->manifest());
  } catch (const Error& e) {
    reading.refusal = e.what();
  }
  return reading;
}

Reading by_planner(const std::string& text) {
  Reading reading;
  try {
    reading.elements = elements_of(manifest_from_hf_config(text));
  } catch (const Error& e) {
    reading.refusal = e.what();
  }
  return reading;
}

nlohmann::json llama() {
  return nlohmann::json::parse(R"({"model_type": "llama", "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 128, "rope_theta": 10000.0,
    "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
}

nlohmann::json gpt2() {
  return nlohmann::json::parse(R"({"model_type": "gpt2", "vocab_size": 256, "n_embd": 32,
    "n_head": 2, "n_layer": 2, "n_positions": 16, "n_inner": null,
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05})");
}

nlohmann::json with(nlohmann::json config, const std::string& key, const nlohmann::json& value) {
  if (value.is_discarded()) {
    config.erase(key);
  } else {
    config[key] = value;
  }
  return config;
}

const nlohmann::json kErase = nlohmann::json(nlohmann::json::value_t::discarded);

// Files whose form is wrong: both readers refuse them.
std::vector<std::pair<std::string, std::string>> refused_by_both() {
  const auto text = [](const nlohmann::json& json) { return json.dump(); };
  return {
      {"not JSON", R"({"model_type": "llama",)"},
      {"a list", "[]"},
      {"{}", "{}"},
      {"an unknown model_type", text(with(llama(), "model_type", "t5"))},
      {"a model_type that is no name", text(with(llama(), "model_type", 7))},
      {"a key twice", R"({"model_type": "gpt2", "n_layer": 1, "n_layer": 48, "n_embd": 8,
                          "n_head": 2, "vocab_size": 16})"},
      {"no vocab_size", text(with(llama(), "vocab_size", kErase))},
      {"hidden_size a string", text(with(llama(), "hidden_size", "64"))},
      {"hidden_size a float", text(with(llama(), "hidden_size", 64.5))},
      {"no heads", text(with(llama(), "num_attention_heads", 0))},
      {"negative layers", text(with(llama(), "num_hidden_layers", -1))},
      {"too many layers", text(with(llama(), "num_hidden_layers", 10001))},
      {"a vocabulary past the bound", text(with(llama(), "vocab_size", 1 << 21))},
      {"a huge intermediate_size", text(with(llama(), "intermediate_size", 1e300))},
      {"kv heads not dividing", text(with(llama(), "num_key_value_heads", 3))},
      {"width not divisible, no head_dim", text(with(llama(), "hidden_size", 66))},
      {"an odd head_dim", text(with(llama(), "head_dim", 7))},
      {"a head_dim past the bound", text(with(llama(), "head_dim", 1 << 21))},
      {"tie_word_embeddings a string", text(with(llama(), "tie_word_embeddings", "yes"))},
      {"attention_bias a string", text(with(llama(), "attention_bias", "no"))},
      {"no context", text(with(llama(), "max_position_embeddings", 0))},
      {"a context that is no number", text(with(llama(), "max_position_embeddings", "x"))},
      {"GPT-2 width not divisible", text(with(gpt2(), "n_embd", 33))},
      {"GPT-2 without n_head", text(with(gpt2(), "n_head", kErase))},
      {"GPT-2 without positions", text(with(gpt2(), "n_positions", 0))},
      {"GPT-2 without layers", text(with(gpt2(), "n_layer", 0))},
      {"GPT-2 n_inner a string", text(with(gpt2(), "n_inner", "4"))},
  };
}

// Files asking for a computation the trainer does not implement: the models' reader refuses
// them naming the field; the planner plans them (it counts what they hold).
std::vector<std::pair<std::string, std::string>> refused_for_their_computation() {
  const auto text = [](const nlohmann::json& json) { return json.dump(); };
  return {
      {"\"hidden_act\"", text(with(llama(), "hidden_act", "gelu"))},
      {"\"mlp_bias\"", text(with(llama(), "mlp_bias", true))},
      {"\"sliding_window\"", text(with(llama(), "sliding_window", 64))},
      {"\"rope_interleaved\"", text(with(llama(), "rope_interleaved", true))},
      {"\"partial_rotary_factor\"", text(with(llama(), "partial_rotary_factor", 0.5))},
      {"\"rope_scaling\"", text(with(llama(), "rope_scaling", {{"rope_type", "yarn"}}))},
      {"\"rms_norm_eps\"", text(with(llama(), "rms_norm_eps", -1))},
      {"\"quantization_config\"", text(with(llama(), "quantization_config", {{"bits", 4}}))},
      {"\"activation_function\"", text(with(gpt2(), "activation_function", "relu"))},
      {"\"n_inner\"", text(with(gpt2(), "n_inner", 100))},
      {"\"tie_word_embeddings\"", text(with(gpt2(), "tie_word_embeddings", false))},
      {"\"scale_attn_by_inverse_layer_idx\"",
       text(with(gpt2(), "scale_attn_by_inverse_layer_idx", true))},
      {"\"sliding_window\"", testing::hf_config_text("published/mistral-7b-v0.1.json")},
  };
}

TEST(HfConfigAgreement, EveryPublishedConfigIsReadAlikeByBoth) {
  for (const std::string& fixture : testing::hf_config_fixtures()) {
    const std::string text = testing::hf_config_text(fixture);
    const Reading models = by_models(text);
    const Reading planner = by_planner(text);
    EXPECT_TRUE(planner.accepted()) << fixture << ": " << planner.refusal;
    if (models.accepted()) {
      EXPECT_EQ(models.elements, planner.elements) << fixture;
    } else {
      // The one kind of published config the models' reader refuses: a window below the context.
      EXPECT_THAT(models.refusal, ::testing::HasSubstr("\"sliding_window\" is 4096")) << fixture;
    }
  }
}

TEST(HfConfigAgreement, HostileFilesAreRefusedByBoth) {
  for (const auto& [name, text] : refused_by_both()) {
    EXPECT_FALSE(by_models(text).accepted()) << name;
    EXPECT_FALSE(by_planner(text).accepted()) << name;
  }
}

TEST(HfConfigAgreement, TheModelsRefuseWhatTheyDoNotComputeWhichThePlannerPlans) {
  for (const auto& [field, text] : refused_for_their_computation()) {
    EXPECT_THAT(by_models(text).refusal, ::testing::HasSubstr(field)) << text;
    EXPECT_TRUE(by_planner(text).accepted()) << field << ": " << by_planner(text).refusal;
  }
  // The base files both readers accept, with the same parameters.
  for (const nlohmann::json& base : {llama(), gpt2()}) {
    EXPECT_TRUE(by_models(base.dump()).accepted()) << by_models(base.dump()).refusal;
    EXPECT_EQ(by_models(base.dump()).elements, by_planner(base.dump()).elements);
  }
}

// A hand-written description without model_type: the planner reads it by its keys, the models'
// reader asks for the model_type that says what computes it (as transformers' AutoConfig does).
TEST(HfConfigAgreement, OnlyThePlannerReadsADescriptionWithoutModelType) {
  const std::string text = with(gpt2(), "model_type", kErase).dump();
  EXPECT_TRUE(by_planner(text).accepted());
  EXPECT_THAT(by_models(text).refusal,
              ::testing::HasSubstr("'config.json': \"model_type\" is missing; shardwise reads the "
                                   "model_types gpt2, llama, mistral"));
}

}  // namespace
}  // namespace shardwise
