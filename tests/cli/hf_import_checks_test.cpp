// What `ckpt import` and `train --resume` refuse rather than load as something else: a GPT-2
// config.json field shardwise's GPT does not compute as written, a folder of weights in a format
// it does not read, non-finite values and shards without checksums; each one line, status 2.
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "../detail/crc32c.hpp"
#include "run_command.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/hf_gpt2.hpp"

namespace shardwise::cli {
namespace {
using namespace shardwise::models;  // NOLINT: the mapping under test

using testing::expect_bad_input;
using ::testing::HasSubstr;
using testing::run_command;
using testing::source_path;

// config.json as transformers' GPT2Config.save_pretrained writes it (transformers 4.x), for
// gpt_micro's shape.
std::string transformers_config(const std::string& extra = "") {
  return R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
  "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_embd": 32,
  "n_head": 2, "n_inner": null, "n_layer": 2, "n_positions": 16, "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true,
  "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
  "summary_type": "cls_index", "summary_use_proj": true, "torch_dtype": "float32",
  "transformers_version": "4.46.0", "use_cache": true, "vocab_size": 256)" +
         extra + "}";
}

// transformers_config() with `key` set to `value` (a JSON text).
std::string with_field(const std::string& key, const std::string& value) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(transformers_config());
  config[key] = nlohmann::ordered_json::parse(value);
  return config.dump();
}

std::string refusal(const std::string& text) {
  try {
    (void)gpt_from_hf_config(text, "config.json");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(HfImportChecks, EveryConfigFieldTheModelDoesNotComputeIsRefusedByName) {
  EXPECT_EQ(refusal(transformers_config()), "");
  EXPECT_THAT(refusal(with_field("scale_attn_by_inverse_layer_idx", "true")),
              HasSubstr("\"scale_attn_by_inverse_layer_idx\" is true; shardwise's GPT does not "
                        "scale attention by the layer's index"));
  EXPECT_THAT(refusal(with_field("scale_attn_weights", "false")),
              HasSubstr("\"scale_attn_weights\" is false"));
  // Upcasting attention in float32 changes nothing here: shardwise computes in float32.
  EXPECT_EQ(refusal(with_field("reorder_and_upcast_attn", "true")), "");
  // gpt2-large's published config.json, as the hub serves it.
  EXPECT_EQ(refusal(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
      "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
      "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024,
      "n_embd": 1280, "n_head": 20, "n_layer": 36, "n_positions": 1024, "resid_pdrop": 0.1,
      "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
      "summary_type": "cls_index", "summary_use_proj": true,
      "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
      "vocab_size": 50257, "n_special": 0, "predict_special_tokens": true, "output_past": true})"),
            "");
  EXPECT_THAT(refusal(with_field("n_special", "2")), HasSubstr("\"n_special\" is 2"));
  EXPECT_THAT(refusal(transformers_config(R"(, "add_cross_attention": true)")),
              HasSubstr("\"add_cross_attention\" is true"));
  EXPECT_THAT(refusal(transformers_config(R"(, "pruned_heads": {"0": [1]})")),
              HasSubstr("\"pruned_heads\""));
  // A field GPT-2's reader has never seen (transformers' GPT2Config ignores rotary_dim too) is
  // taken, with a note.
  EXPECT_EQ(refusal(transformers_config(R"(, "rotary_dim": 8)")), "");
  EXPECT_THAT(refusal(transformers_config(R"(, "tie_word_embeddings": false)")),
              HasSubstr("\"tie_word_embeddings\" is false"));
  EXPECT_THAT(refusal(with_field("model_type", "\"gptj\"")),
              HasSubstr("\"model_type\" is \"gptj\"; expected \"gpt2\""));
}

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("hf_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// A Hugging Face folder of gpt_micro, exported from a short run.
std::filesystem::path exported(const std::filesystem::path& root) {
  const std::string model = source_path("examples/models/gpt_micro.json");
  EXPECT_EQ(run_command({"train", "--model", model, "--steps", "2", "--batch", "4", "--save",
                         (root / "ck").string()})
                .status,
            0);
  EXPECT_EQ(run_command({"ckpt", "export", (root / "ck").string(), "--format", "hf-gpt2", "--out",
                         (root / "hf").string()})
                .status,
            0);
  return root / "hf";
}

TEST(HfImportChecks, BadInputIsOneLineWithStatus2AndNoRankNumbers) {
  const auto root = fresh_folder("status");
  const auto hf = exported(root);
  std::ofstream(hf / "config.json") << with_field("scale_attn_by_inverse_layer_idx", "true");
  for (const char* ranks : {"1", "3"}) {
    const auto result = run_command({"ckpt", "import", hf.string(), "--format", "hf-gpt2", "--out",
                                     (root / "out").string(), "--ranks", ranks});
    EXPECT_EQ(result.status, 2) << result.err;
    EXPECT_THAT(result.err, HasSubstr("\"scale_attn_by_inverse_layer_idx\" is true; shardwise's "
                                      "GPT does not scale attention by the layer's index"));
    EXPECT_EQ(result.err.find("rank "), std::string::npos) << result.err;
  }
  EXPECT_FALSE(std::filesystem::exists(root / "out"));
  // Folders of weights in other formats say what they hold and what is read.
  std::filesystem::create_directories(root / "bin");
  std::ofstream(root / "bin" / "pytorch_model.bin") << "pickle";
  expect_bad_input({"ckpt", "import", (root / "bin").string(), "--format", "hf-gpt2", "--out",
                    (root / "o").string()},
                   "holds pytorch_model.bin, not model.safetensors; shardwise reads "
                   "model.safetensors, or model.safetensors.index.json and its parts");
  // A sharded folder is read through its index (tests/cli/train_llama_test.cpp); one without
  // a weight map says so.
  std::filesystem::create_directories(root / "sharded");
  std::ofstream(root / "sharded" / "model.safetensors.index.json") << "{}";
  std::filesystem::copy_file(exported(root / "unsharded") / "config.json",
                             root / "sharded" / "config.json");
  expect_bad_input({"ckpt", "import", (root / "sharded").string(), "--format", "hf-gpt2", "--out",
                    (root / "o").string()},
                   "has no \"weight_map\" object of tensors and their files");
}

TEST(HfImportChecks, AWeightThatIsNotFiniteIsNotImported) {
  const auto root = fresh_folder("import_nan");
  const auto hf = exported(root);
  const auto reader = ckpt::CheckpointReader::from_safetensors(hf / "model.safetensors");
  const ckpt::ShardRecord& shard = reader.index().find("transformer.wte.weight")->shards[0];
  std::fstream data(hf / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  const float inf = std::numeric_limits<float>::infinity();
  data.seekp(static_cast<std::streamoff>(shard.offset + 4 * 37));
  data.write(reinterpret_cast<const char*>(&inf), sizeof inf);
  data.close();
  expect_bad_input({"ckpt", "import", hf.string(), "--format", "hf-gpt2", "--out",
                    (root / "out").string(), "--ranks", "2"},
                   "model.safetensors': array 'transformer.wte.weight' holds inf (element 37 of "
                   "the block ");
  EXPECT_FALSE(std::filesystem::exists(root / "out"));
}

TEST(HfImportChecks, AFullDiskFailsAnImportAsItFailsTraining) {
  const auto root = fresh_folder("full");
  const auto hf = exported(root);
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit before{};
  getrlimit(RLIMIT_FSIZE, &before);
  rlimit small = before;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  const auto result = run_command({"ckpt", "import", hf.string(), "--format", "hf-gpt2", "--out",
                                   (root / "out").string(), "--ranks", "2"});
  setrlimit(RLIMIT_FSIZE, &before);
  EXPECT_EQ(result.status, 2) << result.err;
  EXPECT_THAT(result.err, HasSubstr("File too large"));
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << result.err;
  EXPECT_FALSE(std::filesystem::exists(root / "out"));
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(root)) ++left;
  EXPECT_EQ(left, 2U) << "a temporary folder was left beside ck and hf";
}

// The checkpoint of a 2-step run of gpt_micro saved under `root`.
std::filesystem::path trained_checkpoint(const std::filesystem::path& root) {
  EXPECT_EQ(run_command({"train", "--model", source_path("examples/models/gpt_micro.json"),
                         "--steps", "2", "--batch", "4", "--save", (root / "ck").string()})
                .status,
            0);
  return root / "ck" / "step-00000002";
}

nlohmann::json read_index(const std::filesystem::path& checkpoint) {
  std::ifstream in(checkpoint / "index.json");
  return nlohmann::json::parse(in);
}

// Rewrites the first float of rank 0's data file as `value` and the checksum of its chunk.
void poison_first_value(const std::filesystem::path& checkpoint, float value) {
  const std::filesystem::path index_path = checkpoint / "index.json";
  nlohmann::json index = read_index(checkpoint);
  nlohmann::json& shard = index["arrays"]["model/transformer.wte.weight"]["shards"][0];
  const std::filesystem::path file = checkpoint / shard["file"].get<std::string>();
  const auto offset = shard["offset"].get<std::uint64_t>();
  const auto chunk = shard["chunk_bytes"].get<std::uint64_t>();
  const auto length = shard["length"].get<std::uint64_t>();
  std::fstream data(file, std::ios::in | std::ios::out | std::ios::binary);
  std::string bytes(std::min(chunk, length), '\0');
  data.seekg(static_cast<std::streamoff>(offset));
  data.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::memcpy(bytes.data(), &value, sizeof value);
  data.seekp(static_cast<std::streamoff>(offset));
  data.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  data.close();
  shard["crc32c"][0] = shardwise::detail::crc32c(bytes.data(), bytes.size());
  std::ofstream(index_path) << index.dump();
}

TEST(HfImportChecks, NonFiniteValuesAndMissingChecksumsAreRefusedOnResume) {
  const auto root = fresh_folder("nan");
  const std::string model = source_path("examples/models/gpt_micro.json");
  const auto step = trained_checkpoint(root);
  poison_first_value(step, std::numeric_limits<float>::quiet_NaN());
  // Every checksum matches (it was rewritten): the value itself is refused, by name.
  const auto verify = run_command({"ckpt", "inspect", "--verify", step.string()});
  EXPECT_EQ(verify.status, 0) << verify.err;
  for (const char* mesh : {"data=1", "fsdp=2"}) {
    const auto resumed = run_command(
        {"train", "--model", model, "--steps", "4", "--batch", "4", "--mesh", mesh, "--zero",
         std::string(mesh) == "data=1" ? "0" : "3", "--resume", step.string()});
    EXPECT_EQ(resumed.status, 2) << mesh;
    EXPECT_THAT(resumed.err, HasSubstr("array 'model/transformer.wte.weight' holds nan"));
    EXPECT_EQ(resumed.out.find("loss nan"), std::string::npos);
  }
  // Nor is it exported.
  expect_bad_input(
      {"ckpt", "export", step.string(), "--format", "hf-gpt2", "--out", (root / "hf").string()},
      "array 'model/transformer.wte.weight' holds nan");
  EXPECT_FALSE(std::filesystem::exists(root / "hf"));
  // A shard without checksums: the index is refused.
  nlohmann::json index = read_index(step);
  index["arrays"]["model/transformer.wte.weight"]["shards"][0]["chunk_bytes"] = 0;
  index["arrays"]["model/transformer.wte.weight"]["shards"][0]["crc32c"] = nlohmann::json::array();
  std::ofstream(step / "index.json") << index.dump();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"ckpt", "inspect", "--verify", step.string()},
        std::vector<std::string>{"train", "--model", model, "--steps", "4", "--batch", "4",
                                 "--resume", step.string()}}) {
    expect_bad_input(args, "has chunk_bytes 0 (no checksums)");
  }
}

TEST(HfImportChecks, MetadataSizesAreHeldAgainstTheArraysBeforeAnythingIsAllocated) {
  const auto root = fresh_folder("sizes");
  const std::string model = source_path("examples/models/gpt_micro.json");
  const auto step = trained_checkpoint(root);
  nlohmann::json index = read_index(step);
  index["metadata"]["model"]["n_embd"] = 8192;
  index["metadata"]["model"]["vocab_size"] = 65536;
  std::ofstream(step / "index.json") << index.dump();
  for (const char* command : {"loss", "export"}) {
    std::vector<std::string> args{"ckpt", command, step.string()};
    if (std::string(command) == "loss") {
      args.insert(args.end(), {"--data", model});
    } else {
      args.insert(args.end(), {"--format", "hf-gpt2", "--out", (root / "out").string()});
    }
    expect_bad_input(args,
                     "array 'model/transformer.wte.weight' is (256, 32) f32; the "
                     "metadata's model has (65536, 8192) f32");
  }
  // A config.json of 2^20 x 2^20: refused for the memory it needs, before any of it is held.
  const auto hf = exported(root / "big");
  std::ofstream(hf / "config.json") << R"({"n_layer": 2, "n_head": 2, "n_embd": 1048576,
      "n_positions": 16, "vocab_size": 1048576})";
  const auto big = run_command({"ckpt", "import", hf.string(), "--format", "hf-gpt2", "--out",
                                (root / "big" / "out").string()});
  EXPECT_EQ(big.status, 2) << big.err;
  EXPECT_THAT(big.err, HasSubstr("model.safetensors' needs about "));
  EXPECT_THAT(big.err, HasSubstr("bytes of buffers; this machine has"));
  // Sizes that fit the machine but not the file: the file's shapes are named.
  std::ofstream(hf / "config.json") << R"({"n_layer": 2, "n_head": 2, "n_embd": 64,
      "n_positions": 16, "vocab_size": 256})";
  expect_bad_input({"ckpt", "import", hf.string(), "--format", "hf-gpt2", "--out",
                    (root / "big" / "out").string()},
                   "is (256, 32); GPT-2's layout of transformer.wte.weight");
}

}  // namespace
}  // namespace shardwise::cli
