// The GPT's reading of a GPT-2 config.json: the same rule as the Llama family's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/models/hf_gpt2.hpp"

namespace shardwise::models {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

// A small GPT-2 as transformers 5's GPT2Config.save_pretrained writes it.
nlohmann::json base() {
  return nlohmann::json::parse(R"({"activation_function": "gelu_new",
    "add_cross_attention": false, "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "dtype": "float32", "embd_pdrop": 0.1, "eos_token_id": 50256,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_embd": 32,
    "n_head": 2, "n_inner": null, "n_layer": 2, "n_positions": 16, "pad_token_id": null,
    "reorder_and_upcast_attn": false, "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true,
    "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
    "summary_type": "cls_index", "summary_use_proj": true, "tie_word_embeddings": true,
    "transformers_version": "5.25.0", "use_cache": true, "vocab_size": 256})");
}

nlohmann::json with(nlohmann::json config, const std::string& key, const nlohmann::json& value) {
  config[key] = value;
  return config;
}

GptConfig read(const nlohmann::json& config, std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> ignored;
  return gpt_from_hf_config(config.dump(), "'config.json'", notes ? *notes : ignored);
}

std::string refusal(const nlohmann::json& config) {
  return error_of([&] { (void)read(config); });
}

TEST(Gpt2ConfigReader, TheSizesAreRead) {
  EXPECT_EQ(read(base()), (GptConfig{2, 2, 32, 16, 256}));
  // GPT2Config's n_positions where a config leaves it out.
  nlohmann::json bare = base();
  bare.erase("n_positions");
  EXPECT_EQ(read(bare).block_size, 1024U);
}

TEST(Gpt2ConfigReader, MetadataIsTakenInSilenceAndAFieldNeverSeenWithANote) {
  std::vector<std::string> notes;
  nlohmann::json config = base();
  config["_name_or_path"] = "openai-community/gpt2";
  config["_attn_implementation_autoset"] = true;
  config["unk_token_id"] = 50256;
  config["n_ctx"] = 16;
  config["task_specific_params"] = {{"text-generation", {{"do_sample", true}}}};
  EXPECT_EQ(read(config, &notes), read(base()));
  EXPECT_THAT(notes, ElementsAre());
  // GPT-J's rotary_dim: transformers' GPT-2 does not read it either.
  EXPECT_EQ(read(with(base(), "rotary_dim", 8), &notes), read(base()));
  EXPECT_THAT(notes, ElementsAre("'config.json': field 'rotary_dim' is not known to shardwise's "
                                 "GPT-2 reader; taken as not changing the computation"));
}

TEST(Gpt2ConfigReader, FieldsAskingForAnotherComputationAreRefusedNamingThem) {
  EXPECT_EQ(read(with(base(), "activation_function", "gelu_pytorch_tanh")), read(base()));
  EXPECT_THAT(refusal(with(base(), "activation_function", "relu")),
              HasSubstr("'config.json': \"activation_function\" is \"relu\"; shardwise's GPT "
                        "computes GELU's tanh form"));
  EXPECT_THAT(refusal(with(base(), "layer_norm_epsilon", 1e-6)),
              HasSubstr("\"layer_norm_epsilon\" is 1e-06; shardwise's GPT uses 1e-5"));
  EXPECT_THAT(refusal(with(base(), "n_inner", 100)),
              HasSubstr("\"n_inner\" is 100; shardwise's GPT has 4 x n_embd"));
  EXPECT_EQ(read(with(base(), "n_inner", 128)), read(base()));
  EXPECT_THAT(refusal(with(base(), "n_ctx", 8)), HasSubstr("\"n_ctx\" is 8; expected n_positions"));
  EXPECT_THAT(refusal(with(base(), "tie_word_embeddings", false)),
              HasSubstr("\"tie_word_embeddings\" is false; shardwise's GPT ties them"));
  EXPECT_THAT(refusal(with(base(), "quantization_config", {{"quant_method", "bitsandbytes"}})),
              HasSubstr("\"quantization_config\" is {\"quant_method\":\"bitsandbytes\"}"));
  EXPECT_THAT(refusal(with(base(), "model_type", "gptj")),
              HasSubstr("\"model_type\" is \"gptj\"; expected \"gpt2\""));
}

TEST(Gpt2ConfigReader, SizesThatCannotBeAreRefusedNamingTheField) {
  nlohmann::json missing = base();
  missing.erase("n_head");
  EXPECT_THAT(refusal(missing), HasSubstr("'config.json': \"n_head\" is missing"));
  EXPECT_THAT(refusal(with(base(), "n_layer", 0)),
              HasSubstr("\"n_layer\" is 0; expected an integer from 1 to 10000"));
  EXPECT_THAT(refusal(with(base(), "n_embd", 33)),
              HasSubstr("'config.json': n_embd 33 is not divisible by n_head 2"));
  EXPECT_THAT(refusal(with(base(), "vocab_size", "256")), HasSubstr("\"vocab_size\" is \"256\""));
}

}  // namespace
}  // namespace shardwise::models
