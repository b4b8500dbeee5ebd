// The Llama family through every strategy as a user runs `shardwise train`: each layout's
// losses within 1e-5 of one rank's over 10 steps, grouped-query attention split and replicated
// over the model axis, the degrees it cannot run refused naming the sizes, and hostile model
// files refused in one line.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "run_command.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/strategy/tensor_parallel_strategy.hpp"
#include "shardwise/train/placement.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

std::vector<std::string> llama(const std::string& file, std::vector<std::string> extra) {
  return testing::train_ten_steps(file, extra);
}

void expect_same_losses(const std::string& file,
                        const std::vector<std::vector<std::string>>& layouts, double* worst) {
  const testing::Result one_run = run_command(llama(file, {}));
  ASSERT_EQ(one_run.status, 0) << one_run.err;
  const auto one = json_lines(one_run.out);
  ASSERT_EQ(one.size(), 11U);
  // The model learns: a run whose gradients were lost would stay near ln(vocabulary).
  EXPECT_LT(one[9]["loss"].get<double>(), one[0]["loss"].get<double>() - 0.5) << file;
  for (const std::vector<std::string>& layout : layouts) {
    std::string where;
    for (const std::string& flag : layout) where += flag + " ";
    const testing::Result r = run_command(llama(file, layout));
    ASSERT_EQ(r.status, 0) << where << r.err;
    const auto many = json_lines(r.out);
    ASSERT_EQ(many.size(), one.size()) << where;
    for (std::size_t s = 0; s + 1 < one.size(); ++s) {
      const double a = one[s]["loss"].get<double>();
      const double b = many[s]["loss"].get<double>();
      EXPECT_NEAR(b, a, 1e-5 * a) << file << " " << where << "step " << s + 1;
      *worst = std::max(*worst, std::abs(b - a) / a);
    }
    EXPECT_EQ(many.back()["summary"]["parameters"], one.back()["summary"]["parameters"]) << where;
    // As many ranks as the mesh has devices.
    const std::string& axes = layout[1];
    std::size_t ranks = 1;
    for (std::size_t at = axes.find('='); at != std::string::npos; at = axes.find('=', at + 1)) {
      ranks *= std::stoul(axes.substr(at + 1));
    }
    EXPECT_EQ(many.back()["summary"]["ranks"].size(), ranks) << where;
  }
}

TEST(TrainLlama, EveryLayoutSeesTheOneRanksLosses) {
  double worst = 0;
  // Untied head, 4 query heads sharing 2 key/value heads.
  expect_same_losses(
      "llama_micro.json",
      {{"--mesh", "data=2"},
       {"--mesh", "fsdp=2", "--zero", "1"},
       {"--mesh", "fsdp=2", "--zero", "2"},
       {"--mesh", "fsdp=2", "--zero", "3"},
       {"--mesh", "fsdp=3", "--zero", "3"},  // uneven groups: 32 and 64 rows over 3 ranks
       {"--mesh", "data=2,fsdp=2", "--zero", "3"},
       {"--mesh", "model=2"},  // key/value heads split
       {"--mesh", "model=4"},  // replicated on 2 ranks each
       {"--mesh", "model=2", "--sequence-parallel"},
       {"--mesh", "model=4", "--sequence-parallel"},
       {"--mesh", "fsdp=2,model=4", "--zero", "3"},  // a shared head's rows sharded by ZeRO
       {"--mesh", "data=2,model=4", "--zero", "1"},
       {"--mesh", "model=4,pipeline=2", "--schedule", "1f1b", "--microbatches", "2"},
       {"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches", "4"},
       {"--mesh", "pipeline=2", "--schedule", "1f1b", "--microbatches", "4"},
       {"--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "2"},
       {"--mesh", "fsdp=2,model=2", "--zero", "3", "--recompute", "full"},
       {"--mesh", "data=2,fsdp=2,model=2,pipeline=2", "--zero", "3"}},
      &worst);
  // SmolLM2's 9 heads and 3 key/value heads at a reduced width, the head tied.
  expect_same_losses("smollm2_micro.json",
                     {{"--mesh", "model=3"},  // split: one key/value head per rank
                      {"--mesh", "model=9"},  // replicated: each on 3 ranks
                      {"--mesh", "model=3", "--sequence-parallel"},
                      {"--mesh", "pipeline=2", "--microbatches", "2"},  // tied through the groups
                      {"--mesh", "fsdp=2,model=3", "--zero", "3"}},
                     &worst);
  // An MLP too narrow for the attention's gradients (2 q + 2 kv widths a row against gate, up and
  // their product's 3 MLP widths): they have scratch of their own (on model=4 with replicated
  // key/value heads too).
  const std::string narrow = ::testing::TempDir() + "llama_narrow_mlp.json";
  std::ofstream(narrow) << R"({"family": "llama", "num_hidden_layers": 2, "hidden_size": 32,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 24,
    "vocab_size": 256, "max_position_embeddings": 16})";
  expect_same_losses(narrow,
                     {{"--mesh", "model=2"},
                      {"--mesh", "model=4", "--recompute", "full"},
                      {"--mesh", "fsdp=2", "--zero", "3", "--recompute", "full"}},
                     &worst);
  std::cout << "worst relative deviation from one rank: " << worst << "\n";
}

// Qwen2 (biases on q, k and v, the head tied) and Qwen3 (each head's queries and keys normed,
// a head_dim other than hidden / heads, attention_bias's biases on q, k, v and o) on every
// strategy and combination: the norms' gradients summed over the model axis, the biases
// replicated with their key/value heads on model=4.
TEST(TrainQwen, EveryLayoutSeesTheOneRanksLosses) {
  double worst = 0;
  for (const char* file : {"qwen2_micro.json", "qwen3_micro.json"}) {
    expect_same_losses(
        file,
        {{"--mesh", "data=2"},
         {"--mesh", "fsdp=2", "--zero", "1"},
         {"--mesh", "fsdp=2", "--zero", "2"},
         {"--mesh", "fsdp=2", "--zero", "3"},
         {"--mesh", "model=2"},
         {"--mesh", "model=4"},
         {"--mesh", "model=2", "--sequence-parallel"},
         {"--mesh", "model=4", "--sequence-parallel", "--recompute", "full"},
         {"--mesh", "fsdp=2,model=4", "--zero", "3"},
         {"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches", "4"},
         {"--mesh", "pipeline=2", "--schedule", "1f1b", "--microbatches", "4"},
         {"--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "2"},
         {"--mesh", "data=2,fsdp=2,model=2,pipeline=2", "--zero", "3"}},
        &worst);
  }
  std::cout << "worst relative deviation from one rank: " << worst << "\n";
}

// Full recomputation gives the same losses and keeps less.
TEST(TrainLlama, RecomputationKeepsLessForTheSameLosses) {
  const auto none = json_lines(run_command(llama("llama_micro.json", {})).out);
  const auto full = json_lines(run_command(llama("llama_micro.json", {"--recompute", "full"})).out);
  ASSERT_EQ(full.size(), none.size());
  for (std::size_t s = 0; s + 1 < none.size(); ++s) EXPECT_EQ(full[s]["loss"], none[s]["loss"]);
  const auto peak = [](const std::vector<nlohmann::json>& run) {
    return run.back()["summary"]["ranks"][0]["activations_peak_bytes"].get<std::int64_t>();
  };
  EXPECT_LT(peak(full), peak(none));
}

// The degrees grouped-query attention cannot run, refused naming the sizes.
TEST(TrainLlama, DegreesThatSplitAKeyValueHeadAreRefused) {
  const std::string file = ::testing::TempDir() + "llama_6_heads_2_kv.json";
  std::ofstream(file) << R"({"family": "llama", "num_hidden_layers": 1, "hidden_size": 48,
    "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 96,
    "vocab_size": 258, "max_position_embeddings": 16})";
  expect_bad_input({"train", "--model", file, "--steps", "1", "--mesh", "model=3"},
                   "the model degree 3 neither divides the 2 key/value heads "
                   "(num_key_value_heads) nor is a multiple of them");
  expect_bad_input({"train", "--model", source_path("examples/models/llama_micro.json"), "--steps",
                    "1", "--mesh", "model=8"},
                   "the model degree 8 does not divide the 4 attention heads");
}

// One truth for the split: the placements the trainer computes with are those the reference
// strategy's rules give (its QKV spec for the query heads, the key/value heads' whole units
// kept whole where the degree does not divide them), for every degree the model runs.
TEST(TrainLlama, TheStrategysRulesGiveTheTrainersPlacements) {
  models::LlamaConfig c = models::llama_preset("smollm2-135m", "preset");
  c.n_layer = 2;
  c.vocab_size = 9 * 64;
  c.intermediate_size = 9 * 32;
  const models::LlamaDefinition definition(c);
  for (int degree = 1; degree <= 9; ++degree) {
    const Mesh mesh({"model"}, {degree});
    const ShardingRules rules = default_sharding_rules(ParallelismConfig::from_mesh(mesh));
    const std::vector<PartitionSpec> from_rules =
        train::model_placements(definition.manifest(), mesh, rules.axis_rules, rules.name_rules);
    if (degree != 1 && degree != 3 && degree != 9) {
      EXPECT_THROW((void)definition.model_placements(degree), InvalidArgument) << degree;
      continue;
    }
    const std::vector<PartitionSpec> trainer = definition.model_placements(degree);
    EXPECT_EQ(trainer, from_rules) << "degree " << degree;
    if (degree == 1) continue;
    const PartitionSpec qkv = TensorParallelStrategy().get_attention_qkv_spec();
    EXPECT_EQ(qkv, (PartitionSpec{"model", None}));
    EXPECT_EQ(trainer[2], PartitionSpec{"model"}) << "q_proj";  // qkv, trailing None dropped
    // k_proj: split at 3 (one head each), whole at 9 (each head on 3 ranks).
    EXPECT_EQ(trainer[3], degree == 3 ? PartitionSpec{"model"} : PartitionSpec()) << degree;
    EXPECT_EQ(models::replicates_kv_heads(c, degree), degree == 9);
    // Replicated, each key/value projection's rows in 3 blocks (one head each); else none.
    const std::vector<train::SharedRows> shared = definition.shared_rows(degree);
    ASSERT_EQ(shared.size(), degree == 9 ? 2 * c.n_layer : 0U) << degree;
    for (std::size_t i = 0; i < shared.size(); ++i) {
      EXPECT_EQ(shared[i].blocks, 3U);
      EXPECT_EQ(shared[i].parameter, i % 2 == 0 ? 3 + i / 2 * 9 : 4 + i / 2 * 9) << i;
    }
  }
}

// `shardwise specs` shows the blocks the trainer holds: key/value projections split at model=2
// and, at model=4, whole in JAX's terms (P(), shard_shape) but one head a rank as the trainer
// holds them (held_shape, with a note), every held shape the trainer's (the same manifest, head
// widths kept).
TEST(TrainLlama, SpecsShowTheBlocksTheTrainerHolds) {
  const std::string file = source_path("examples/models/llama_micro.json");
  const std::shared_ptr<const train::ModelDefinition> model = models::model_from_config(
      nlohmann::json::parse(std::ifstream(file)).dump(), "llama_micro.json");
  for (const int degree : {2, 4}) {
    const Mesh mesh({"model"}, {degree});
    const std::vector<train::ParameterSpec> held = train::local_parameters(
        model->parameters(), mesh, 0, model->model_placements(degree), model->shared_rows(degree));
    const testing::Result r = run_command(
        {"specs", "--model", file, "--mesh", "model=" + std::to_string(degree), "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto parameters = nlohmann::json::parse(r.out)["parameters"];
    ASSERT_EQ(parameters.size(), held.size());
    for (std::size_t p = 0; p < held.size(); ++p) {
      EXPECT_EQ(parameters[p]["name"], held[p].name);
      EXPECT_EQ(parameters[p]["held_shape"].get<std::vector<std::int64_t>>(), held[p].shape)
          << held[p].name << " on model=" << degree;
      if (held[p].gradient.model_sharers == 1) {
        EXPECT_EQ(parameters[p]["shard_shape"], parameters[p]["held_shape"]) << held[p].name;
      }
    }
    EXPECT_EQ(held[3].name, "model.layers.0.self_attn.k_proj.weight");
    EXPECT_EQ(held[3].shape[0], 8);  // one head of 8: its own, or the one it shares
    EXPECT_EQ(held[3].gradient.model_sharers, degree == 2 ? 1U : 2U);
    EXPECT_EQ(parameters[3]["shard_shape"][0], degree == 2 ? 8 : 16);
    const std::string notes = nlohmann::json::parse(r.out)["notes"].dump();
    EXPECT_EQ(notes.find("k_proj.weight and 7 more: replicated key/value heads, which the "
                         "trainer holds rows in 2 blocks over 'model', each on 2 ranks") !=
                  std::string::npos,
              degree == 4)
        << notes;
  }
  // The last rank of model=4 holds the second head's rows, which the rank before it shares.
  const Mesh mesh({"model"}, {4});
  for (const std::int64_t rank : {1, 2, 3}) {
    const std::vector<train::ParameterSpec> held = train::local_parameters(
        model->parameters(), mesh, rank, model->model_placements(4), model->shared_rows(4));
    EXPECT_EQ(held[3].block[0].start, rank < 2 ? 0 : 8) << rank;
    EXPECT_EQ(held[3].block[0].stop, rank < 2 ? 8 : 16) << rank;
    EXPECT_EQ(held[4].name, "model.layers.0.self_attn.v_proj.weight");
    EXPECT_EQ(held[4].block[0].start, rank < 2 ? 0 : 8) << rank;
  }
}

// Fine-tuning in one command: --init-from a Hugging Face folder (here one `ckpt export` wrote)
// starts from its weights on any layout, exactly as `ckpt import` then --resume does; the
// folder is the model unless --model names the same one; what cannot start is refused.
TEST(TrainLlama, InitFromAHuggingFaceFolderStartsFromItsWeights) {
  for (const auto& [model, format] : {std::pair{std::string("llama_micro.json"), "hf-llama"},
                                      {std::string("gpt_micro.json"), "hf-gpt2"}}) {
    const std::string base = ::testing::TempDir() + "init_from_" + format;
    std::filesystem::remove_all(base);
    const std::string ckpt = base + "/ckpt", hf = base + "/hf", imported = base + "/imported";
    ASSERT_EQ(run_command({"train", "--model", source_path("examples/models/" + model), "--steps",
                           "3", "--batch", "12", "--seq", "12", "--save", ckpt})
                  .status,
              0);
    ASSERT_EQ(run_command({"ckpt", "export", ckpt, "--format", format, "--out", hf}).status, 0);
    ASSERT_EQ(run_command({"ckpt", "import", hf, "--format", format, "--out", imported}).status, 0);
    const auto from = [&](std::vector<std::string> start, const std::string& mesh) {
      std::vector<std::string> args{"train", "--steps", "4",    "--batch", "12",     "--seq",
                                    "12",    "--lr",    "3e-3", "--json",  "--mesh", mesh};
      args.insert(args.end(), start.begin(), start.end());
      const testing::Result r = run_command(args);
      EXPECT_EQ(r.status, 0) << r.err;
      std::vector<double> losses;
      for (const auto& line : json_lines(r.out)) {
        if (line.contains("step")) losses.push_back(line["loss"].get<double>());
      }
      return losses;
    };
    const std::vector<double> resumed = from({"--model", hf, "--resume", imported}, "data=2");
    ASSERT_EQ(resumed.size(), 4U);
    EXPECT_EQ(from({"--init-from", hf}, "data=2"), resumed) << format;
    const std::vector<double> other = from({"--init-from", hf, "--model", hf}, "model=2");
    ASSERT_EQ(other.size(), 4U);
    for (std::size_t s = 0; s < 4; ++s) EXPECT_NEAR(other[s], resumed[s], 1e-5 * resumed[s]);
    // A fresh run from the seed starts elsewhere: the weights were read.
    EXPECT_NE(from({"--model", hf}, "data=2").front(), resumed.front()) << format;
    expect_bad_input({"train", "--init-from", hf, "--resume", imported, "--steps", "1"},
                     "--init-from and --resume both say where the run starts");
    expect_bad_input({"train", "--init-from", hf, "--model", "llama-tiny", "--steps", "1"},
                     "--init-from '" + hf + "' holds a ");
    expect_bad_input({"train", "--init-from", base, "--steps", "1"},
                     "is a directory, not a file (nor a Hugging Face model folder");
    expect_bad_input({"train", "--init-from", "", "--steps", "1"}, "--init-from is an empty path");
  }
}

// A sharded Hugging Face folder (model.safetensors.index.json and its parts, as transformers
// writes one past max_shard_size) imports and starts a run as the unsharded file does; an index
// that names a part outside its folder, a part without the tensor, or no weight map is refused.
TEST(TrainLlama, ShardedHuggingFaceFoldersReadAsOneFile) {
  const std::string base = ::testing::TempDir() + "sharded_hf";
  std::filesystem::remove_all(base);
  const std::string ckpt = base + "/ckpt", hf = base + "/hf", sharded = base + "/sharded";
  ASSERT_EQ(run_command({"train", "--model", source_path("examples/models/llama_micro.json"),
                         "--steps", "2", "--batch", "12", "--seq", "12", "--save", ckpt})
                .status,
            0);
  ASSERT_EQ(run_command({"ckpt", "export", ckpt, "--format", "hf-llama", "--out", hf}).status, 0);
  std::filesystem::create_directories(sharded);
  std::filesystem::copy_file(hf + "/config.json", sharded + "/config.json");
  std::filesystem::copy_file(hf + "/model.safetensors",
                             sharded + "/model-00001-of-00001.safetensors");
  const ckpt::CheckpointReader exported =
      ckpt::CheckpointReader::from_safetensors(hf + "/model.safetensors");
  nlohmann::json map = nlohmann::json::object();
  for (const ckpt::ArrayRecord& array : exported.index().arrays) {
    map[array.name] = "model-00001-of-00001.safetensors";
  }
  const auto write_index = [&](const nlohmann::json& index) {
    std::ofstream(sharded + "/model.safetensors.index.json") << index.dump();
  };
  write_index({{"metadata", {{"total_size", 0}}}, {"weight_map", map}});
  const auto loss_of = [&](const std::string& folder) {
    const std::string out = base + "/imported_" + std::filesystem::path(folder).filename().string();
    const testing::Result imported =
        run_command({"ckpt", "import", folder, "--format", "hf-llama", "--out", out});
    EXPECT_EQ(imported.status, 0) << imported.err;
    const std::string text = base + "/text.txt";
    std::ofstream(text) << "The quick brown fox jumps over the lazy dog. ";
    const testing::Result loss = run_command({"ckpt", "loss", out, "--data", text, "--json"});
    EXPECT_EQ(loss.status, 0) << loss.err;
    return nlohmann::json::parse(loss.out)["loss"].get<double>();
  };
  EXPECT_EQ(loss_of(sharded), loss_of(hf));
  EXPECT_EQ(run_command({"train", "--init-from", sharded, "--steps", "1", "--seq", "12"}).status,
            0);
  const auto refused = [&](const nlohmann::json& index, const std::string& message) {
    write_index(index);
    expect_bad_input({"ckpt", "import", sharded, "--format", "hf-llama", "--out", base + "/x"},
                     message);
  };
  nlohmann::json outside = map;
  outside["model.norm.weight"] = "../hf/model.safetensors";
  refused({{"weight_map", outside}}, "a part is a .safetensors file beside the index");
  nlohmann::json missing = map;
  missing["model.norm.weight"] = "model-00002-of-00002.safetensors";
  refused({{"weight_map", missing}}, "model-00002-of-00002.safetensors");
  nlohmann::json wrong = map;
  wrong["not.in.the.part"] = "model-00001-of-00001.safetensors";
  refused({{"weight_map", wrong}}, "puts tensor 'not.in.the.part' in");
  refused(nlohmann::json::object(), "has no \"weight_map\" object");
  refused({{"weight_map", {{"a", 7}}}}, "the file of tensor 'a' is 7, not a file name");
}

// Hostile model files: one line each, status 2, the field named.
TEST(TrainLlama, HostileConfigFieldsAreRefusedInOneLine) {
  const auto base = nlohmann::json::parse(R"({"family": "llama", "num_hidden_layers": 1,
    "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 64, "vocab_size": 256, "max_position_embeddings": 16})");
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases{
      {"hidden_size", nullptr, "\"hidden_size\" is missing"},
      {"num_hidden_layers", 0, "\"num_hidden_layers\" is 0; expected an integer from 1 to"},
      {"num_attention_heads", -4, "\"num_attention_heads\" is -4"},
      {"vocab_size", 9223372036854775807LL, "\"vocab_size\" is 9223372036854775807"},
      {"intermediate_size", 1e300, "\"intermediate_size\" is 1e+300"},
      {"head_dim", 7, "head_dim is 7; rotary embeddings rotate pairs"},
      {"num_key_value_heads", 3,
       "num_attention_heads 4 is not a multiple of num_key_value_heads 3"},
      {"rope_theta", -1, "\"rope_theta\" is -1; expected a finite positive number"},
      {"rope_scaling", nlohmann::json{{"rope_type", "yarn"}, {"factor", 4}},
       "\"rope_scaling\" is {\"factor\":4,\"rope_type\":\"yarn\"}"},
      {"rope_scaling", nlohmann::json{{"rope_type", "llama3"}, {"factor", 8}},
       "\"low_freq_factor\" is missing"},
      {"rope_scaling", nlohmann::json{{"rope_type", "default"}, {"partial_rotary_factor", 0.5}},
       "its \"partial_rotary_factor\" is 0.5: shardwise's Llama rotates every dimension of a "
       "head (1.0)"},
      {"rope_parameters", nlohmann::json{{"rope_type", 3}}, "its \"rope_type\" is no name"},
      {"max_position_embeddings", 1048577, "\"max_position_embeddings\" is 1048577"},
      {"mlp_bias", true, "\"mlp_bias\" is true"},
      {"hidden_act", "gelu", "\"hidden_act\" is \"gelu\""},
      {"sliding_window", 8,
       "\"sliding_window\" is 8; sliding_window 8 is below "
       "max_position_embeddings 16"},
      {"qk_layernorm", true, "\"qk_layernorm\" is true; a setting of another architecture"},
      {"final_logit_softcapping", 30.0, "\"final_logit_softcapping\" is 30"}};
  for (const auto& [field, value, message] : cases) {
    nlohmann::json config = base;
    if (value.is_null()) {
      config.erase(field);
    } else {
      config[field] = value;
    }
    const std::string file = ::testing::TempDir() + "hostile_llama.json";
    std::ofstream(file) << config.dump();
    expect_bad_input({"train", "--model", file, "--steps", "1"}, message);
  }
}

}  // namespace
}  // namespace shardwise::cli
