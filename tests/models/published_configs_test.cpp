// Published models' config.json, as the hub serves them and as transformers 4 and 5 write them:
// each one shardwise computes loads with its published size; the others are refused naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "hf_config_fixtures.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/models/model_registry.hpp"

namespace shardwise::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Expected {
  std::int64_t parameters = 0;  // 0: refused
  std::string refusal;          // what the refusal says
  double rope_factor = 0;       // Llama: llama3's factor (0: unscaled)
  double rope_theta = 0;
  std::size_t context = 0;
};

// The published parameter counts (the hub's model cards) and what each config asks.
const std::map<std::string, Expected>& expected() {
  static const std::map<std::string, Expected> table{
      {"gpt2", {124'439'808, "", 0, 0, 1024}},
      {"gpt2-default", {124'439'808, "", 0, 0, 1024}},
      {"gpt2-medium", {354'823'168, "", 0, 0, 1024}},
      {"gpt2-large", {774'030'080, "", 0, 0, 1024}},
      {"gpt2-xl", {1'557'611'200, "", 0, 0, 1024}},
      {"llama-3.2-1b", {1'235'814'400, "", 32, 500000, 131072}},
      {"llama-3.2-1b-instruct", {1'235'814'400, "", 32, 500000, 131072}},
      {"llama-3.1-8b", {8'030'261'248, "", 8, 500000, 131072}},
      {"llama-3.1-8b-instruct", {8'030'261'248, "", 8, 500000, 131072}},
      {"tinyllama-1.1b-chat", {1'100'048'384, "", 0, 10000, 2048}},
      {"smollm2-135m", {134'515'008, "", 0, 100000, 8192}},
      {"smollm2-135m-instruct", {134'515'008, "", 0, 100000, 8192}},
      {"llama-transformers-4.47-save", {134'515'008, "", 0, 100000, 8192}},
      {"llama-default", {6'738'415'616, "", 0, 10000, 2048}},  // Llama-2-7B
      {"llama-small", {106'816, "", 0, 10000, 128}},
      {"llama-llama3-rope", {106'816, "", 8, 500000, 16384}},
      {"mistral-7b-instruct-v0.3", {7'248'023'552, "", 0, 1000000, 32768}},
      {"mistral-small-window", {106'816, "", 0, 10000, 128}},
      {"mistral-7b-v0.1",
       {0,
        "\"sliding_window\" is 4096; sliding_window 4096 is below max_position_embeddings 32768: "
        "attention limited to a window is not computed by shardwise's Llama"}},
      {"mistral-default",
       {0,
        "\"sliding_window\" is 4096; sliding_window 4096 is below max_position_embeddings "
        "131072"}},
  };
  return table;
}

TEST(PublishedConfigs, EveryFixtureHasAnExpectation) {
  const std::vector<std::string> fixtures = testing::hf_config_fixtures();
  EXPECT_GE(fixtures.size(), 3 * 14U);
  for (const std::string& fixture : fixtures) {
    EXPECT_EQ(expected().count(testing::hf_config_model(fixture)), 1U) << fixture;
  }
}

TEST(PublishedConfigs, EachLoadsWithItsPublishedSizeOrIsRefusedNamingWhy) {
  for (const std::string& fixture : testing::hf_config_fixtures()) {
    const auto found = expected().find(testing::hf_config_model(fixture));
    if (found == expected().end()) continue;
    const Expected& want = found->second;
    const std::string what = "'" + fixture + "'";
    std::vector<std::string> notes;
    if (want.parameters == 0) {
      EXPECT_THAT(testing::error_of(
                      [&] { (void)read_hf_config(testing::hf_config_text(fixture), what, notes); }),
                  HasSubstr(what + ": " + want.refusal))
          << fixture;
      continue;
    }
    const auto model = read_hf_config(testing::hf_config_text(fixture), what, notes);
    EXPECT_EQ(model->manifest().num_parameters(), want.parameters) << fixture;
    EXPECT_EQ(model->context_length(), want.context) << fixture;
    if (const auto* llama = dynamic_cast<const LlamaDefinition*>(model.get())) {
      EXPECT_EQ(llama->config().rope_scaling.factor, want.rope_factor) << fixture;
      EXPECT_EQ(llama->config().rope_theta, want.rope_theta) << fixture;
    }
    // Only SmolLM2-Instruct's transformers.js settings are unknown to the readers.
    if (testing::hf_config_model(fixture) == "smollm2-135m-instruct") {
      EXPECT_THAT(notes, ElementsAre(what + ": field 'transformers.js_config' is not known to "
                                            "shardwise's Llama reader; taken as not changing the "
                                            "computation"));
    } else {
      EXPECT_THAT(notes, IsEmpty()) << fixture;
    }
  }
}

TEST(PublishedConfigs, LlamaThreeReadsItsWholeRotaryScaling) {
  for (const char* folder : {"published", "transformers4", "transformers5"}) {
    const std::string fixture = std::string(folder) + "/llama-3.2-1b.json";
    std::vector<std::string> notes;
    const auto model = read_hf_config(testing::hf_config_text(fixture), fixture, notes);
    const LlamaConfig& c = dynamic_cast<const LlamaDefinition&>(*model).config();
    EXPECT_EQ(c.head_dim, 64U) << fixture;
    EXPECT_EQ(c.n_kv_head, 8U) << fixture;
    EXPECT_TRUE(c.tie_word_embeddings) << fixture;
    EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0) << fixture;
    EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0) << fixture;
    EXPECT_EQ(c.rope_scaling.original_context, 8192.0) << fixture;
    EXPECT_EQ(c.rms_norm_eps, 1e-5) << fixture;
  }
}

}  // namespace
}  // namespace shardwise::models
