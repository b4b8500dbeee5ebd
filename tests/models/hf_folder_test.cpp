// A Hugging Face folder read as a model (models::open_model_source): its stop ids as
// transformers' generate() takes them, its config.json's messages naming the file, and the
// folder as Hugging Face's cache keeps it (snapshots whose files are links into ../../blobs/).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/models/model_source.hpp"

namespace shardwise::models {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

LlamaConfig tiny() {
  LlamaConfig c;
  c.n_layer = 1;
  c.hidden_size = 8;
  c.n_head = 2;
  c.n_kv_head = 1;
  c.head_dim = 4;
  c.intermediate_size = 16;
  c.context_length = 16;
  c.vocab_size = 32;
  return c;
}

// Parameter p's element i holds p + i / 1000: every value says where it came from.
std::vector<float> values_of(std::size_t p, std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(p) + 0.001F * i;
  return values;
}

fs::path fresh(const std::string& name) {
  const fs::path path = fs::path(::testing::TempDir()) / ("hf_folder_" + name);
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// The tiny Llama's parameters from `first` to `last`, as a .safetensors file at `path`.
void write_weights(const fs::path& path, std::size_t first, std::size_t last) {
  const auto specs = LlamaDefinition(tiny()).parameters();
  std::vector<std::vector<float>> values;
  std::vector<ckpt::SafetensorsEntry> entries;
  for (std::size_t p = first; p < last; ++p) {
    values.push_back(values_of(p, static_cast<std::size_t>(num_elements(specs[p].shape))));
  }
  for (std::size_t p = first; p < last; ++p) {
    entries.push_back({specs[p].name, DType::kF32, specs[p].shape,
                       std::as_bytes(std::span<const float>(values[p - first]))});
  }
  ckpt::write_safetensors_file(path, entries, {});
}

// A plain folder: config.json and model.safetensors (and what `extra` adds).
fs::path plain_folder(const std::string& name) {
  const fs::path folder = fresh(name);
  write(folder / "config.json", llama_config_json(tiny(), false));
  write_weights(folder / "model.safetensors", 0, LlamaDefinition(tiny()).parameters().size());
  return folder;
}

// Every parameter of `source`'s model, read whole, equals what was written.
void expect_written_values(const ModelSource& source) {
  const auto specs = source.model->parameters();
  std::vector<std::vector<float>> read(specs.size());
  std::vector<train::ParameterBlock> blocks;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    read[p].resize(static_cast<std::size_t>(num_elements(specs[p].shape)));
    ShardIndex box;
    for (const std::int64_t size : specs[p].shape) box.push_back({0, size});
    blocks.push_back({specs[p].name, specs[p].shape, box, read[p]});
  }
  source.values(blocks);
  for (std::size_t p = 0; p < specs.size(); ++p) {
    EXPECT_EQ(read[p], values_of(p, read[p].size())) << specs[p].name;
  }
}

TEST(HfFolder, StopIdsComeFromGenerationConfigWhereItSaysThem) {
  const fs::path folder = plain_folder("stop_ids");
  nlohmann::json config = nlohmann::json::parse(llama_config_json(tiny(), false));
  config["eos_token_id"] = 2;
  write(folder / "config.json", config.dump());
  EXPECT_THAT(open_model_source(folder.string(), "model").end_tokens, ElementsAre(2));
  // Llama 3's instruct models stop on three ids, which only generation_config.json lists.
  write(folder / "generation_config.json",
        R"({"bos_token_id": 1, "do_sample": true, "eos_token_id": [1, 8, 9], "temperature": 0.6,
            "top_p": 0.9, "transformers_version": "4.42.3"})");
  EXPECT_THAT(open_model_source(folder.string(), "model").end_tokens, ElementsAre(1, 8, 9));
  write(folder / "generation_config.json", R"({"eos_token_id": 7})");
  const ModelSource source = open_model_source(folder.string(), "model");
  EXPECT_THAT(source.end_tokens, ElementsAre(7));
  EXPECT_EQ(source.end_tokens_from, "'" + (folder / "generation_config.json").string() + "'");
  // One that says none: config.json's.
  write(folder / "generation_config.json", R"({"eos_token_id": null, "max_length": 20})");
  const ModelSource fallback = open_model_source(folder.string(), "model");
  EXPECT_THAT(fallback.end_tokens, ElementsAre(2));
  EXPECT_EQ(fallback.end_tokens_from, "'" + (folder / "config.json").string() + "'");
}

TEST(HfFolder, AMalformedGenerationConfigIsRefusedNamingTheFile) {
  const fs::path folder = plain_folder("bad_generation");
  const std::string file = (folder / "generation_config.json").string();
  const auto refusal = [&](const std::string& text) {
    write(folder / "generation_config.json", text);
    return error_of([&] { (void)open_model_source(folder.string(), "model"); });
  };
  EXPECT_THAT(refusal(R"({"eos_token_id": )"), HasSubstr("invalid JSON in model '" + file + "': "));
  EXPECT_THAT(refusal("[1, 2]"), HasSubstr("model '" + file + "' holds [1,2], not a JSON object"));
  EXPECT_THAT(refusal(R"({"eos_token_id": "</s>"})"),
              HasSubstr("model '" + file + "': \"eos_token_id\" holds \"</s>\", not a token id"));
  EXPECT_THAT(refusal(R"({"eos_token_id": [1, 2.5]})"),
              HasSubstr("\"eos_token_id\" holds 2.5, not a token id"));
}

// config.json that is not JSON, {}, or of an unknown model_type: one line naming the file and
// what is wrong.
TEST(HfFolder, ConfigMessagesNameTheFileAndWhatIsWrong) {
  const fs::path folder = plain_folder("bad_config");
  const std::string file = "model '" + (folder / "config.json").string() + "'";
  const auto refusal = [&](const std::string& text) {
    write(folder / "config.json", text);
    return error_of([&] { (void)open_model_source(folder.string(), "model"); });
  };
  EXPECT_THAT(refusal(R"({"model_type": "llama",)"),
              HasSubstr("invalid JSON in " + file + ": parse error at line 1, column 24"));
  EXPECT_EQ(refusal("{}"), file +
                               ": \"model_type\" is missing; shardwise reads the model_types "
                               "gpt2, llama, mistral, qwen2, qwen3, mixtral, qwen3_moe");
  EXPECT_EQ(refusal(R"({"model_type": "t5", "d_model": 512})"),
            file +
                ": \"model_type\" is \"t5\", which no model family reads; shardwise reads the "
                "model_types gpt2, llama, mistral, qwen2, qwen3, mixtral, qwen3_moe");
  EXPECT_EQ(refusal("7"), file + " holds 7, not a JSON object of a model's fields");
}

TEST(HfFolder, TheReadersNotesReachTheSource) {
  const fs::path folder = plain_folder("notes");
  nlohmann::json config = nlohmann::json::parse(llama_config_json(tiny(), false));
  config["foo"] = 1;
  write(folder / "config.json", config.dump());
  EXPECT_THAT(open_model_source(folder.string(), "model").notes,
              ElementsAre("model '" + (folder / "config.json").string() +
                          "': field 'foo' is not known to shardwise's Llama reader; taken as not "
                          "changing the computation"));
}

// models--org--name/blobs/<hash> and snapshots/<revision>/<file> -> ../../blobs/<hash>, as
// huggingface_hub's cache keeps a download.
fs::path cache_snapshot(const std::string& name, const std::vector<std::string>& files,
                        const fs::path& from) {
  const fs::path repo = fresh(name) / "models--org--tiny";
  const fs::path snapshot = repo / "snapshots" / "0123abcd";
  fs::create_directories(repo / "blobs");
  fs::create_directories(snapshot);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string blob = "blob" + std::to_string(i) + "5f3e";
    fs::copy_file(from / files[i], repo / "blobs" / blob);
    fs::create_symlink(fs::path("../../blobs") / blob, snapshot / files[i]);
  }
  return snapshot;
}

TEST(HfFolder, ACacheSnapshotIsReadThroughItsLinks) {
  const fs::path plain = plain_folder("cache_source");
  write(plain / "generation_config.json", R"({"eos_token_id": [3, 4]})");
  write(plain / "tokenizer.json", "{}");
  const fs::path snapshot = cache_snapshot(
      "cache", {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"},
      plain);
  ASSERT_TRUE(fs::is_symlink(snapshot / "model.safetensors"));
  const ModelSource source = open_model_source(snapshot.string(), "model");
  EXPECT_THAT(source.end_tokens, ElementsAre(3, 4));
  EXPECT_EQ(source.tokenizer, snapshot / "tokenizer.json");
  expect_written_values(source);
}

TEST(HfFolder, AShardedCacheSnapshotIsReadThroughItsLinks) {
  const fs::path plain = fresh("sharded_source");
  const auto specs = LlamaDefinition(tiny()).parameters();
  write(plain / "config.json", llama_config_json(tiny(), false));
  const std::size_t half = specs.size() / 2;
  write_weights(plain / "model-00001-of-00002.safetensors", 0, half);
  write_weights(plain / "model-00002-of-00002.safetensors", half, specs.size());
  nlohmann::json map;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    map[specs[p].name] =
        p < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write(plain / "model.safetensors.index.json",
        nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  const fs::path snapshot =
      cache_snapshot("sharded_cache",
                     {"config.json", "model.safetensors.index.json",
                      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"},
                     plain);
  expect_written_values(open_model_source(snapshot.string(), "model"));
}

TEST(HfFolder, ALinkThatLeadsNowhereIsRefusedNamingIt) {
  const fs::path plain = plain_folder("dangling_source");
  const fs::path snapshot = cache_snapshot("dangling", {"config.json", "model.safetensors"}, plain);
  fs::remove(snapshot.parent_path().parent_path() / "blobs" / "blob15f3e");
  EXPECT_THAT(error_of([&] { (void)open_model_source(snapshot.string(), "model"); }),
              HasSubstr("'" + (snapshot / "model.safetensors").string() +
                        "' is a link that leads to no file"));
}

}  // namespace
}  // namespace shardwise::models
