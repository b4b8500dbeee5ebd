// The Llama family's reading of a config.json field by field: what changes the computation is
// computed or refused naming the field and its value, what does not is taken, and a field the
// reader has never seen is taken and said in one note.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

// A small Llama as transformers 4 writes it.
nlohmann::json base() {
  return nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"],
    "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
    "intermediate_size": 128, "max_position_embeddings": 128, "mlp_bias": false,
    "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
    "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "float32",
    "transformers_version": "4.46.0", "use_cache": true, "vocab_size": 256})");
}

nlohmann::json with(nlohmann::json config, const std::string& key, const nlohmann::json& value) {
  config[key] = value;
  return config;
}

LlamaConfig read(const nlohmann::json& config, std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> ignored;
  return llama_config_from_json(config.dump(), "'config.json'", notes ? *notes : ignored);
}

std::string refusal(const nlohmann::json& config) {
  return error_of([&] { (void)read(config); });
}

const nlohmann::json kLlama3Rope = {{"rope_type", "llama3"},
                                    {"factor", 8.0},
                                    {"low_freq_factor", 1.0},
                                    {"high_freq_factor", 4.0},
                                    {"original_max_position_embeddings", 8192}};

TEST(LlamaConfigReader, TheSizesAreRead) {
  const LlamaConfig c = read(base());
  EXPECT_EQ(c.vocab_size, 256U);
  EXPECT_EQ(c.hidden_size, 64U);
  EXPECT_EQ(c.n_head, 4U);
  EXPECT_EQ(c.n_kv_head, 2U);
  EXPECT_EQ(c.head_dim, 16U);
  EXPECT_EQ(c.context_length, 128U);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.factor, 0.0);
}

// Names, ids, version stamps, metadata and generation settings: taken, without a note.
TEST(LlamaConfigReader, MetadataIsTakenInSilence) {
  nlohmann::json config = base();
  config["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct";
  config["_model_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct";
  config["_attn_implementation_autoset"] = true;
  config["_commit_hash"] = "abc";
  config["unk_token_id"] = 0;
  config["pad_token_id"] = 2;
  config["dtype"] = "bfloat16";
  config["is_llama_config"] = true;
  config["pretraining_tp"] = 2;
  config["temperature"] = 0.6;
  config["max_length"] = 20;
  config["attn_implementation"] = "sdpa";
  std::vector<std::string> notes;
  EXPECT_EQ(read(config, &notes), read(base()));
  EXPECT_THAT(notes, ElementsAre());
}

TEST(LlamaConfigReader, AFieldNeverSeenIsTakenWithOneNoteNamingIt) {
  std::vector<std::string> notes;
  const LlamaConfig c =
      read(with(with(base(), "foo", 3), "transformers.js_config", {{"a", 1}}), &notes);
  EXPECT_EQ(c, read(base()));
  EXPECT_THAT(notes,
              ElementsAre("'config.json': field 'foo' is not known to shardwise's Llama "
                          "reader; taken as not changing the computation",
                          "'config.json': field 'transformers.js_config' is not known to "
                          "shardwise's Llama reader; taken as not changing the computation"));
}

// A file of many unknown fields makes a bounded number of lines: the first 16 named, the rest
// counted.
TEST(LlamaConfigReader, ManyUnknownFieldsMakeABoundedNumberOfNotes) {
  nlohmann::json config = base();
  for (int i = 0; i < 100; ++i) config["field_" + std::to_string(100 + i)] = i;
  std::vector<std::string> notes;
  EXPECT_EQ(read(config, &notes), read(base()));
  ASSERT_EQ(notes.size(), 17U);
  EXPECT_THAT(notes.front(), HasSubstr("field 'field_100' is not known"));
  EXPECT_EQ(notes.back(),
            "'config.json': 84 more fields are taken as not changing the computation");
}

// The trainer's own file: a field it does not know is a typo, refused.
TEST(LlamaConfigReader, TheTrainersOwnFileRefusesAFieldNeverSeen) {
  nlohmann::json own = base();
  own.erase("model_type");
  own["family"] = "llama";
  EXPECT_EQ(read(own), read(base()));
  EXPECT_THAT(refusal(with(own, "num_hiden_layers", 3)),
              HasSubstr("\"num_hiden_layers\" is a field shardwise's Llama does not implement"));
}

TEST(LlamaConfigReader, HiddenActSiluOrSwishIsSiluAnythingElseIsRefused) {
  EXPECT_EQ(read(with(base(), "hidden_act", "swish")), read(base()));
  EXPECT_EQ(read(with(base(), "hidden_act", "silu")), read(base()));
  EXPECT_THAT(refusal(with(base(), "hidden_act", "gelu")),
              HasSubstr("'config.json': \"hidden_act\" is \"gelu\"; shardwise's Llama computes "
                        "SwiGLU with SiLU"));
  EXPECT_THAT(refusal(with(base(), "hidden_act", "relu")), HasSubstr("\"hidden_act\" is \"relu\""));
}

TEST(LlamaConfigReader, FieldsAtTheValueTheComputationAssumesAreTakenOthersRefused) {
  EXPECT_EQ(read(with(base(), "partial_rotary_factor", 1.0)), read(base()));
  EXPECT_THAT(refusal(with(base(), "partial_rotary_factor", 0.5)),
              HasSubstr("\"partial_rotary_factor\" is 0.5; shardwise's Llama rotates every "
                        "dimension of a head (1.0)"));
  EXPECT_EQ(read(with(base(), "rope_interleaved", false)), read(base()));
  EXPECT_THAT(refusal(with(base(), "rope_interleaved", true)),
              HasSubstr("\"rope_interleaved\" is true; shardwise's Llama rotates the two halves"));
  EXPECT_THAT(refusal(with(base(), "mlp_bias", true)),
              HasSubstr("\"mlp_bias\" is true; shardwise's Llama has no"));
  // attention_bias is computed: biases on q, k, v and o.
  EXPECT_TRUE(read(with(base(), "attention_bias", true)).attention_bias);
  EXPECT_EQ(read(with(base(), "use_sliding_window", false)), read(base()));
  EXPECT_THAT(refusal(with(base(), "quantization_config", {{"quant_method", "gptq"}})),
              HasSubstr("\"quantization_config\" is {\"quant_method\":\"gptq\"}; shardwise reads "
                        "float weights"));
  EXPECT_THAT(refusal(with(base(), "pruned_heads", {{"0", {1}}})),
              HasSubstr("\"pruned_heads\" is {\"0\":[1]}"));
  EXPECT_EQ(read(with(base(), "pruned_heads", nlohmann::json::object())), read(base()));
}

// A sliding window no shorter than the context changes nothing; a shorter one is refused.
TEST(LlamaConfigReader, ASlidingWindowIsTakenWhereItSpansTheContext) {
  EXPECT_EQ(read(with(base(), "sliding_window", nullptr)), read(base()));
  EXPECT_EQ(read(with(base(), "sliding_window", 128)), read(base()));
  EXPECT_EQ(read(with(base(), "sliding_window", 4096)), read(base()));
  EXPECT_THAT(refusal(with(base(), "sliding_window", 64)),
              HasSubstr("\"sliding_window\" is 64; sliding_window 64 is below "
                        "max_position_embeddings 128: attention limited to a window is not "
                        "computed"));
  EXPECT_THAT(refusal(with(base(), "sliding_window", "64")),
              HasSubstr("\"sliding_window\" is \"64\"; expected null or a number of tokens"));
}

// model_type "mistral" is read with MistralConfig's defaults: 8 key/value heads, a context of
// 131072 and a window of 4096 where the file leaves them out.
TEST(LlamaConfigReader, MistralIsALlamaWithMistralsDefaults) {
  nlohmann::json mistral = with(base(), "model_type", "mistral");
  EXPECT_EQ(read(with(mistral, "sliding_window", nullptr)), read(base()));
  mistral["num_attention_heads"] = 8;
  mistral.erase("num_key_value_heads");
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(read(mistral).n_kv_head, 8U);
  mistral.erase("sliding_window");
  EXPECT_EQ(read(mistral).context_length, 128U);  // a window of 4096 spans it
  mistral["max_position_embeddings"] = 8192;
  EXPECT_THAT(refusal(mistral),
              HasSubstr("\"sliding_window\" is missing, which transformers' Mistral reads as "
                        "4096; sliding_window 4096 is below max_position_embeddings 8192"));
  mistral.erase("max_position_embeddings");
  mistral["sliding_window"] = nullptr;  // null: no window
  EXPECT_EQ(read(mistral).context_length, 131072U);
  EXPECT_THAT(refusal(with(base(), "model_type", "gemma")),
              HasSubstr("\"model_type\" is \"gemma\"; expected \"llama\", \"mistral\", "
                        "\"qwen2\", \"qwen3\", \"mixtral\" or \"qwen3_moe\""));
}

// rope_type wins over the older type where both are given, as transformers 5 reads them (and a
// note says so: transformers 4 read "type").
TEST(LlamaConfigReader, RopeTypeWinsOverType) {
  nlohmann::json rope = kLlama3Rope;
  rope["type"] = "default";
  std::vector<std::string> notes;
  const LlamaConfig c = read(with(base(), "rope_scaling", rope), &notes);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_context, 8192.0);
  EXPECT_THAT(notes, ElementsAre(HasSubstr("\"rope_scaling\" holds \"rope_type\": \"llama3\" and "
                                           "\"type\": \"default\"; read as \"llama3\"")));
  // The other way round: unscaled, and llama3's fields are not read for type default.
  rope["type"] = "llama3";
  rope["rope_type"] = "default";
  notes.clear();
  EXPECT_EQ(read(with(base(), "rope_scaling", rope), &notes).rope_scaling.factor, 0.0);
  EXPECT_THAT(notes, ::testing::Contains(HasSubstr("field 'rope_scaling.factor' is not read for "
                                                   "rotary type default")));
  // The older "type" alone is read.
  nlohmann::json old = kLlama3Rope;
  old.erase("rope_type");
  old["type"] = "llama3";
  EXPECT_EQ(read(with(base(), "rope_scaling", old)).rope_scaling.factor, 8.0);
}

// transformers 4's rope_scaling beside a top-level rope_theta, and transformers 5's
// rope_parameters holding rope_theta, read alike.
TEST(LlamaConfigReader, RopeScalingAndRopeParametersReadAlike) {
  nlohmann::json four = with(with(base(), "rope_scaling", kLlama3Rope), "rope_theta", 500000.0);
  nlohmann::json rope = kLlama3Rope;
  rope["rope_theta"] = 500000.0;
  nlohmann::json five = base();
  five.erase("rope_theta");
  five.erase("rope_scaling");
  five["rope_parameters"] = rope;
  const LlamaConfig c = read(four);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(read(five), c);
  // transformers 5's default rope.
  five["rope_parameters"] = {{"rope_theta", 100000}, {"rope_type", "default"}};
  EXPECT_EQ(read(five).rope_theta, 100000.0);
  EXPECT_EQ(read(five).rope_scaling.factor, 0.0);
  // An empty object is none.
  EXPECT_EQ(read(with(base(), "rope_scaling", nlohmann::json::object())), read(base()));
  // Both objects, saying the same: read; saying otherwise: refused (transformers reads
  // rope_scaling in rope_parameters' place).
  EXPECT_EQ(read(with(four, "rope_parameters", rope)), c);
  EXPECT_THAT(
      refusal(with(four, "rope_parameters", {{"rope_type", "default"}, {"rope_theta", 500000.0}})),
      HasSubstr("\"rope_parameters\" is {\"rope_theta\":500000.0,\"rope_type\":"
                "\"default\"}; it disagrees with \"rope_scaling\""));
  // A theta in the object that differs from the top level's: versions of transformers disagree.
  EXPECT_THAT(refusal(with(five, "rope_theta", 10000.0)),
              HasSubstr("\"rope_theta\" is 10000.0; the rotary object's rope_theta is 100000"));
}

TEST(LlamaConfigReader, RopeObjectsAskingForAnotherComputationAreRefused) {
  EXPECT_THAT(refusal(with(base(), "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}})),
              HasSubstr("\"rope_scaling\" is {\"factor\":4,\"rope_type\":\"yarn\"}; shardwise's "
                        "Llama computes rotary embeddings unscaled"));
  EXPECT_THAT(refusal(with(base(), "rope_scaling", {{"type", "linear"}, {"factor", 2}})),
              HasSubstr("\"rope_scaling\" is {\"factor\":2,\"type\":\"linear\"}"));
  EXPECT_THAT(refusal(with(base(), "rope_parameters",
                           {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}})),
              HasSubstr("its \"partial_rotary_factor\" is 0.5: shardwise's Llama rotates every "
                        "dimension of a head (1.0)"));
  nlohmann::json rope = kLlama3Rope;
  rope.erase("low_freq_factor");
  EXPECT_THAT(refusal(with(base(), "rope_scaling", rope)),
              HasSubstr("\"low_freq_factor\" is missing from \"rope_scaling\""));
  rope = kLlama3Rope;
  rope["factor"] = -1;
  EXPECT_THAT(refusal(with(base(), "rope_scaling", rope)),
              HasSubstr("its \"factor\" is -1, not a finite positive number"));
  EXPECT_THAT(refusal(with(base(), "rope_scaling", 3)),
              HasSubstr("\"rope_scaling\" is 3; expected an object or null"));
}

TEST(LlamaConfigReader, SizesThatCannotBeAreRefusedNamingTheField) {
  nlohmann::json missing = base();
  missing.erase("hidden_size");
  EXPECT_THAT(refusal(missing), HasSubstr("'config.json': \"hidden_size\" is missing"));
  EXPECT_THAT(refusal(with(base(), "num_hidden_layers", 0)),
              HasSubstr("\"num_hidden_layers\" is 0; expected an integer from 1 to 10000"));
  EXPECT_THAT(refusal(with(base(), "vocab_size", 1 << 21)),
              HasSubstr("\"vocab_size\" is 2097152; expected an integer from 1 to 1048576"));
  EXPECT_THAT(refusal(with(base(), "num_key_value_heads", 3)),
              HasSubstr("num_attention_heads 4 is not a multiple of num_key_value_heads 3"));
  EXPECT_THAT(refusal(with(base(), "head_dim", 7)),
              HasSubstr("head_dim is 7; rotary embeddings rotate pairs"));
  EXPECT_THAT(refusal(with(base(), "tie_word_embeddings", "yes")),
              HasSubstr("\"tie_word_embeddings\" is \"yes\"; expected true or false"));
  EXPECT_THAT(refusal(with(base(), "rms_norm_eps", 0)),
              HasSubstr("\"rms_norm_eps\" is 0; expected a finite positive number"));
}

}  // namespace
}  // namespace shardwise::models
