// `shardwise plan` as a user runs it: one layout evaluated, a search ranked, the JSON object the
// issue names, and one clear line for bad input.
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "run_command.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/models/model_resolution.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::run_command;

std::string gpt2_config() {
  const std::string path = ::testing::TempDir() + "plan_gpt2.json";
  std::ofstream(path) << R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024,
                             "n_embd": 768, "n_layer": 12, "n_head": 12})";
  return path;
}

TEST(PlanCommand, OneLayoutAsJson) {
  const testing::Result r =
      run_command({"plan", "--model", gpt2_config(), "--devices", "8", "--global-batch", "64",
                   "--seq", "1024", "--layout", "data=2,fsdp=4", "--zero", "3", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["parameters"], 124'439'808);
  EXPECT_EQ(j["model"]["layers"], 12);
  EXPECT_EQ(j["best"], 0);
  ASSERT_EQ(j["candidates"].size(), 1U);
  const auto& c = j["candidates"][0];
  EXPECT_EQ(c["layout"]["fsdp"], 4);
  EXPECT_EQ(c["layout"]["zero"], 3);
  EXPECT_EQ(c["layout"]["microbatches"], 8);
  EXPECT_EQ(c["layout"]["schedule"], "1f1b");
  // ZeRO-3 over 4 fsdp ranks, bf16 with Adam: 16 bytes per parameter, a quarter each.
  const auto& m = c["memory_per_device"];
  EXPECT_EQ(m["params"].get<std::int64_t>() + m["grads"].get<std::int64_t>() +
                m["optimizer"].get<std::int64_t>(),
            16 * 124'439'808 / 4);
  EXPECT_TRUE(m["total"].is_number_integer());
  EXPECT_GT(c["comm_bytes_per_step"]["fsdp"].get<std::int64_t>(), 0);
  EXPECT_GT(c["comm_bytes_per_step"]["data"].get<std::int64_t>(), 0);
  EXPECT_TRUE(c["fits"].get<bool>());
  EXPECT_GT(c["mfu"].get<double>(), 0);
  // The same bytes by collective kind: ZeRO-3 gathers and reduce-scatters over fsdp, HSDP
  // all-reduces over data.
  std::int64_t by_axis = 0;
  std::int64_t by_kind = 0;
  for (const auto& [axis, bytes] : c["comm_bytes_per_step"].items())
    by_axis += bytes.get<std::int64_t>();
  for (const auto& [kind, bytes] : c["comm_bytes_per_kind"].items())
    by_kind += bytes.get<std::int64_t>();
  EXPECT_NEAR(static_cast<double>(by_kind), static_cast<double>(by_axis), 4.0);
  EXPECT_GT(c["comm_bytes_per_kind"]["all_gather"].get<std::int64_t>(), 0);
  EXPECT_GT(c["comm_bytes_per_kind"]["reduce_scatter"].get<std::int64_t>(), 0);
  EXPECT_GT(c["comm_bytes_per_kind"]["all_reduce"].get<std::int64_t>(), 0);
}

TEST(PlanCommand, ASearchRanksLayoutsForAPerson) {
  const testing::Result r = run_command({"plan", "--model", "small", "--devices", "16",
                                         "--global-batch", "32", "--seq", "256", "--top", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("valid layouts evaluated"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n1  data="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n3  data="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P params"), std::string::npos) << r.out;
}

TEST(PlanCommand, BadInput) {
  const std::string model = gpt2_config();
  const std::vector<std::string> base{"plan", "--model", model, "--global-batch",
                                      "64",   "--seq",   "1024"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_bad_input(with({"--devices", "0"}), "--devices is 0; expected 1 to");
  expect_bad_input(with({"--devices", "8", "--device", "tpu"}), "--device 'tpu' is not a preset");
  expect_bad_input(with({"--devices", "8", "--precision", "fp8"}), "--precision is 'fp8'");
  expect_bad_input(with({"--devices", "8", "--blas", "mkl"}),
                   "--blas chooses the library whose products --device cpu measures; --device "
                   "h100-80gb is not measured");
  expect_bad_input(with({"--devices", "1", "--device", "cpu", "--blas", "openblas"}),
                   "--blas is 'openblas'; expected onednn, mkl or mkl:PATH");
  expect_bad_input(with({"--devices", "8", "--layout", "data=4"}), "= 4, not the 8 devices");
  expect_bad_input(with({"--devices", "8", "--layout", "tensor=8"}), "--layout: axis 'tensor'");
  expect_bad_input(with({"--devices", "8", "--layout", "data=4,context=2"}),
                   "--layout: axis 'context' is context parallelism");
  expect_bad_input(with({"--devices", "8", "--efficiency", "nan"}), "--efficiency");
  expect_bad_input(with({"--devices", "8", "--overlap", "1.5"}), "--overlap is 1.5");
  expect_bad_input(with({"--devices", "7"}), "no layout of 7 devices");
  expect_bad_input(with({"--devices", "8", "--device", model, "--devices-per-node", "4"}),
                   "gives devices_per_node itself");
  expect_bad_input(with({"--devices", "8", "--device", model}), "unknown key");
  expect_bad_input(with({"--devices", "8", "--zero", "3"}),
                   "--zero describes the layout given with --layout");
  expect_bad_input(
      {"plan", "--model", "/dev/zero", "--devices", "8", "--global-batch", "8", "--seq", "8"},
      "is not a regular file");
  // A pipe named like a checkpoint: refused before it is opened (opening waits for a writer).
  const std::string pipe = ::testing::TempDir() + "pipe.safetensors";
  ::unlink(pipe.c_str());
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  expect_bad_input({"plan", "--model", pipe, "--devices", "8", "--global-batch", "8", "--seq", "8"},
                   "is not a readable regular file");
  ::unlink(pipe.c_str());
  const std::string hostile = ::testing::TempDir() + "hostile.safetensors";
  {
    std::ofstream out(hostile, std::ios::binary);
    const unsigned char length[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    out.write(reinterpret_cast<const char*>(length), 8);
    out << "{}";
  }
  expect_bad_input(
      {"plan", "--model", hostile, "--devices", "8", "--global-batch", "8", "--seq", "8"},
      "says its safetensors header has 9223372036854775807 bytes");
}

// What a hostile audit found: numbers whose predictions are not finite, flags that disagree
// with the model or are ignored, tensors sharing bytes.
TEST(PlanCommand, RefusesWhatWouldBeIgnoredContradictedOrNotFinite) {
  const std::vector<std::string> tiny{"plan", "--model",        "tiny", "--devices",
                                      "2",    "--global-batch", "2"};
  const auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tiny;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_bad_input(with({"--seq", "64", "--efficiency", "1e-300"}),
                   "--efficiency is 1e-300; expected 0.01 to 1");
  expect_bad_input(with({"--seq", "64", "--heads", "1000"}),
                   "--heads 1000 does not divide the hidden size 128");
  expect_bad_input(with({"--seq", "64", "--heads", "8"}), "--heads 8: the model has 4 heads");
  expect_bad_input(with({"--seq", "64", "--layout", "data=2", "--top", "0"}), "--top is 0");
  expect_bad_input(with({"--seq", "64", "--layout", "data=2", "--top", "3"}),
                   "--top ranks the layouts a search finds");
  expect_bad_input(with({"--seq", "16777216"}),
                   "--seq 16777216 is longer than the model's context of 64 positions");
  EXPECT_EQ(run_command(with({"--seq", "64", "--heads", "4", "--layout", "data=2"})).status, 0);
  // The residual stream's type is the trainer's bf16's: bf16-mixed keeps its stream in bf16.
  expect_bad_input(with({"--seq", "64", "--residual-dtype", "bf16"}),
                   "--residual-dtype is for --precision bf16");
  expect_bad_input(with({"--seq", "64", "--precision", "bf16", "--residual-dtype", "fp8"}),
                   "--residual-dtype is 'fp8'; expected fp32 or bf16");
  EXPECT_EQ(run_command(with({"--seq", "64", "--precision", "bf16", "--residual-dtype", "bf16",
                              "--layout", "data=2"}))
                .status,
            0);
  const auto file = [](const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  };
  const std::string wide_heads = file("wide_heads.json", R"({"parameters": [
      {"name": "wte.weight", "shape": [256, 64], "dtype": "f32"},
      {"name": "layers.0.mlp.up.weight", "shape": [256, 64], "dtype": "f32"}],
      "axis_units": {"heads": 128}})");
  expect_bad_input(
      {"plan", "--model", wide_heads, "--devices", "1", "--global-batch", "1", "--seq", "8"},
      "the model's head size (axis_units.heads) 128 does not divide its query "
      "width 64");
  // Two tensors claiming the same bytes.
  const std::string header =
      R"({"wte": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},)"
      R"( "h.0.mlp.c_fc.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 32]}})";
  std::string bytes(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  const std::string overlapping =
      file("overlap.safetensors", bytes + header + std::string(32, '\0'));
  expect_bad_input(
      {"plan", "--model", overlapping, "--devices", "1", "--global-batch", "1", "--seq", "8"},
      "safetensors tensors 'wte' [0, 32) and 'h.0.mlp.c_fc.weight' [16, 32) overlap");
}

}  // namespace
}  // namespace shardwise::cli

namespace shardwise::cli {
namespace {

// The planner against the trainer it describes: for tiny and every layout `shardwise train`
// runs (data parallel, ZeRO 1 to 3 over fsdp or data, HSDP, tensor parallel alone and with
// them, pipelines, recomputation, every family), in float32 and in bf16, the predicted
// parameter, gradient, optimizer and compute-copy bytes equal every rank's measured ones, the
// predicted bytes per axis per step equal the runtime's counters, and the activations the
// trainer's peak, exactly.
TEST(PlanCommand, EqualsTheTrainersMeasurementsWhereTheyAreExact) {
  for (const auto& [mesh, zero, ranks] : std::vector<std::tuple<std::string, std::string, int>>{
           {"data=2", "0", 2},
           {"data=2", "1", 2},
           {"data=4", "2", 4},
           {"fsdp=2", "1", 2},
           {"fsdp=2", "2", 2},
           {"fsdp=2", "3", 2},
           {"fsdp=4", "3", 4},
           {"data=2,fsdp=2", "1", 4},
           {"data=2,fsdp=2", "2", 4},
           {"data=2,fsdp=2", "3", 4},
           {"model=2", "0", 2},
           {"model=4", "0", 4},
           {"data=2,model=2", "0", 4},
           {"data=2,model=2", "1", 4},
           {"fsdp=2,model=2", "1", 4},
           {"fsdp=2,model=2", "2", 4},
           {"fsdp=2,model=2", "3", 4},
           {"data=2,fsdp=2,model=2", "3", 8},
           // with sequence parallelism
           {"model=2 sp", "0", 2},
           {"model=4 sp", "0", 4},
           {"fsdp=2,model=2 sp", "1", 4},
           {"data=2,fsdp=2,model=2 sp", "3", 8},
           // pipelined: 2 micro-batches, 1F1B (rank 0 is the first stage, as the plan's device)
           {"pipeline=2", "0", 2},
           {"data=2,pipeline=2", "1", 4},
           {"fsdp=2,pipeline=2", "2", 4},
           {"fsdp=2,pipeline=2", "3", 4},
           {"model=2,pipeline=2", "0", 4},
           {"model=2,pipeline=2 sp", "1", 4},
           // full recomputation: each layer's output kept, one layer's scratch per chunk
           {"data=2 full", "0", 2},
           {"fsdp=2,model=2 sp full", "3", 4},
           {"pipeline=2 full", "0", 2},
           {"fsdp=2,pipeline=2 full", "3", 4},
           {"model=2,pipeline=2 sp full", "1", 4},
           // interleaved: each of the two model chunks keeps its own slots and scratch
           {"pipeline=2 il", "0", 2},
           {"data=2,pipeline=2 il", "1", 4},
           {"fsdp=2,pipeline=2 il full", "3", 4},
           // uneven stages of a 5-layer model (3 + 2; 2 + 2 + 1; interleaved 2 + 1 + 1 + 1)
           {"pipeline=2 odd", "0", 2},
           {"pipeline=3 odd", "1", 3},
           {"fsdp=2,pipeline=2 il odd", "2", 4},
           // the Llama (llama-tiny: 4 heads sharing 2 key/value heads, untied head), its key/value
           // heads split on model=2 and replicated on model=4; a tied one on a pipeline
           {"data=2 llama", "1", 2},
           {"fsdp=2 llama", "3", 2},
           {"data=2,fsdp=2 llama", "2", 4},
           {"model=2 llama", "0", 2},
           {"model=4 llama", "0", 4},
           {"model=2 sp llama", "0", 2},
           {"model=4 sp llama", "1", 4},
           {"fsdp=2,model=2 llama", "3", 4},
           {"fsdp=2,model=4 sp full llama", "3", 8},
           {"pipeline=2 llama", "0", 2},
           {"fsdp=2,pipeline=2 llama", "3", 4},
           {"model=2,pipeline=2 sp llama", "1", 4},
           {"pipeline=2 il llama", "0", 2},
           {"pipeline=2 full llama", "0", 2},
           {"pipeline=2 tied", "0", 2},
           {"model=4,pipeline=2 sp tied", "1", 8},
           {"fsdp=2,model=2 tied", "3", 4},
           // Qwen2 (biases on q, k and v, replicated with their heads on model=4) and Qwen3 (each
           // head's queries and keys normed: their inputs and statistics kept, the norms'
           // gradients summed over the model axis)
           {"fsdp=2,model=2 qwen2", "3", 4},
           {"model=4 sp qwen2", "0", 4},
           {"model=2 qwen3", "0", 2},
           {"model=4 sp full qwen3", "1", 4},
           {"pipeline=2 qwen3", "0", 2},
           // an MLP too narrow for the attention's gradients, which have scratch of their own
           {"model=2 narrow", "0", 2},
           {"fsdp=2,model=4 full narrow", "3", 8},
           // a vocabulary whose head blocks stop at 128 rows rather than at 2^15 floats, and one
           // whose blocks stop at 2^15 floats (384 on model=2: 192 a rank, 170 rows a block)
           {"data=2 vocab", "1", 2},
           {"model=2 vocab", "0", 2},
           {"model=2 small vocab", "0", 2},
           // bf16 (float32 masters, bf16 copies and ZeRO-3 gathers; gradients reduced in
           // float32, or in bf16 with " rbf16"): state, copies, traffic and activations
           {"data=2 bf16", "0", 2},
           {"data=2 bf16 rbf16", "1", 2},
           {"fsdp=2 bf16", "2", 2},
           {"fsdp=2 bf16 rbf16", "3", 2},
           {"data=2,fsdp=2 bf16", "3", 4},
           {"fsdp=2 bf16 llama", "3", 2},
           {"model=2 sp bf16 llama", "0", 2},
           {"fsdp=2,model=2 sp bf16 rbf16 qwen2", "3", 4},
           {"model=4 sp full bf16 qwen3", "1", 4},
           {"pipeline=2 bf16", "0", 2},
           {"fsdp=2,pipeline=2 bf16 llama", "3", 4},
           {"model=4,pipeline=2 sp bf16 tied", "3", 8},
           // the residual stream in bf16 too (" sbf16"): its arrays in bf16, computed in the
           // working layer, a layer's input widened in backward
           {"data=2 bf16 sbf16", "0", 2},
           {"fsdp=2 bf16 sbf16 llama", "3", 2},
           {"model=2 sp bf16 sbf16 qwen2", "0", 2},
           {"model=4 sp full bf16 sbf16 qwen3", "1", 4},
           {"pipeline=2 bf16 sbf16", "0", 2},
           // Mixtures of Experts: the router and the stacked experts in each layer, the routed
           // rows the layers keep
           {"data=2 mixtral", "0", 2},
           {"fsdp=2 mixtral", "3", 2},
           {"data=2,fsdp=2 full mixtral", "3", 4},
           {"pipeline=2 qwen3moe", "0", 2},
           {"fsdp=2 bf16 qwen3moe", "3", 2},
           // the expert axis: each rank's experts, the dispatch's all-to-alls and the rows its
           // experts receive, on a model whose every token chooses every expert (a balanced
           // routing, which the planner predicts)
           {"expert=2 balanced", "0", 2},
           {"expert=4 balanced", "2", 4},
           {"data=2,expert=2 balanced", "1", 4},
           {"fsdp=2,expert=2 balanced", "3", 4},
           {"expert=2 full balanced", "0", 2},
           {"expert=2 bf16 balanced", "3", 2},
           {"pipeline=2,expert=2 balanced", "0", 4},
           // and its auxiliary loss: its statistics summed over the batch's axes
           {"data=2,expert=2 balanced aux", "1", 4},
           {"fsdp=2,expert=2 balanced aux", "3", 4},
           // the experts folded over the model axis: each model rank's share of the rows
           // dispatched over model x expert, summed back over the model axis; the router's
           // gradient summed there
           {"model=2 balanced", "0", 2},
           {"model=2 sp balanced", "1", 2},
           {"model=2,expert=2 sp balanced", "0", 4},
           {"fsdp=2,model=2 full balanced", "3", 4},
           {"model=2,pipeline=2 sp balanced", "0", 4},
           {"model=2,expert=2 sp bf16 balanced", "2", 4},
           {"model=2,expert=2 balanced aux", "0", 4},
           // the expert bias: each step's choice counts summed over the ranks routing other
           // rows, in one message
           {"data=2,expert=2 balanced bias", "1", 4},
           {"fsdp=2,model=2 sp balanced bias", "3", 4},
           {"model=2,pipeline=2 balanced bias", "0", 4},
           // dense layers among routed ones (a balanced routing): the
           // dispatch, the rows kept and the router's sums of the routed layers only
           {"expert=2 mixed", "0", 2},
           {"model=2,expert=2 sp mixed", "1", 4},
           {"pipeline=2,expert=2 full mixed", "0", 4},
           {"fsdp=2,model=2 bias mixed", "3", 4}}) {
    const bool odd = mesh.find(" odd") != std::string::npos;
    const bool tied = mesh.find(" tied") != std::string::npos;
    const bool vocab = mesh.find(" vocab") != std::string::npos;
    const bool narrow = mesh.find(" narrow") != std::string::npos;
    const bool bf16 = mesh.find(" bf16") != std::string::npos;
    const bool reduce_bf16 = mesh.find(" rbf16") != std::string::npos;
    const bool stream_bf16 = mesh.find(" sbf16") != std::string::npos;
    const bool balanced = mesh.find(" balanced") != std::string::npos;
    const std::string model_file = ::testing::TempDir() + "plan_agreement_model.json";
    if (odd) {
      std::ofstream(model_file)
          << R"({"n_layer": 5, "n_head": 4, "n_embd": 128, "block_size": 64, "vocab_size": 256})";
    }
    if (tied) {
      std::ofstream(model_file) << R"({"family": "llama", "num_hidden_layers": 4,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 64,
        "tie_word_embeddings": true})";
    }
    if (vocab) {
      const bool small = mesh.find(" small") != std::string::npos;
      std::ofstream(model_file) << R"({"family": "llama", "num_hidden_layers": 2,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 128, "vocab_size": )"
                                << (small ? 384 : 32768) << R"(, "max_position_embeddings": 64})";
    }
    if (balanced) {
      const bool aux = mesh.find(" aux") != std::string::npos;
      std::ofstream(model_file) << R"({"family": "mixtral", "num_hidden_layers": 2,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 48, "vocab_size": 256, "max_position_embeddings": 64,
        "num_local_experts": 4, "num_experts_per_tok": 4, "output_router_logits": )"
                                << (aux ? "true" : "false") << "}";
    }
    if (mesh.find(" mixed") != std::string::npos) {
      // Qwen3-MoE's dense layers among routed ones: layers 1 and 3 route, 0 and 2 are dense.
      std::ofstream(model_file) << R"({"family": "qwen3_moe", "num_hidden_layers": 4,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 96, "vocab_size": 256, "max_position_embeddings": 64,
        "num_experts": 4, "num_experts_per_tok": 4, "moe_intermediate_size": 32,
        "decoder_sparse_step": 2})";
    }
    if (narrow) {
      // The dead gate, up and product hold 3 x 16 floats a row on model=2; attention's
      // gradients need 2 x 32 + 2 x 16.
      std::ofstream(model_file) << R"({"family": "llama", "num_hidden_layers": 2,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "intermediate_size": 32, "vocab_size": 256, "max_position_embeddings": 64})";
    }
    const bool mixed = mesh.find(" mixed") != std::string::npos;
    const std::string model_name = odd || tied || vocab || narrow || balanced || mixed ? model_file
                                   : mesh.find(" llama") != std::string::npos    ? "llama-tiny"
                                   : mesh.find(" qwen2") != std::string::npos    ? "qwen2-tiny"
                                   : mesh.find(" qwen3moe") != std::string::npos ? "qwen3-moe-tiny"
                                   : mesh.find(" qwen3") != std::string::npos    ? "qwen3-tiny"
                                   : mesh.find(" mixtral") != std::string::npos  ? "mixtral-tiny"
                                                                                 : "tiny";
    const bool sequence_parallel = mesh.find(" sp") != std::string::npos;
    const bool full_recompute = mesh.find(" full") != std::string::npos;
    const bool interleaved = mesh.find(" il") != std::string::npos;
    const std::string axes = mesh.substr(0, mesh.find(' '));
    const auto degree = [&](const std::string& axis) {
      const std::size_t at = axes.find(axis + "=");
      return at == std::string::npos ? 1 : std::stoi(axes.substr(at + axis.size() + 1));
    };
    const int model = degree("model") * degree("pipeline");
    const int microbatches = degree("pipeline") > 1 ? 2 : 1;
    std::vector<std::string> train{"train", "--model", model_name, "--mesh",  axes, "--zero",
                                   zero,    "--batch", "8",        "--steps", "2",  "--json"};
    std::vector<std::string> plan{"plan",
                                  "--model",
                                  model_name,
                                  "--devices",
                                  std::to_string(ranks),
                                  "--global-batch",
                                  "8",
                                  "--seq",
                                  "64",
                                  "--micro-batch",
                                  std::to_string(8 / (ranks / model) / microbatches),
                                  "--precision",
                                  bf16 ? "bf16" : "fp32",
                                  "--layout",
                                  axes,
                                  "--zero",
                                  zero,
                                  "--json"};
    if (bf16) train.insert(train.end(), {"--precision", "bf16"});
    if (reduce_bf16) {
      for (auto* command : {&train, &plan})
        command->insert(command->end(), {"--reduce-dtype", "bf16"});
    }
    if (stream_bf16) {
      for (auto* command : {&train, &plan})
        command->insert(command->end(), {"--residual-dtype", "bf16"});
    }
    if (mesh.find(" bias") != std::string::npos) {
      for (auto* command : {&train, &plan})
        command->insert(command->end(), {"--expert-bias-rate", "0.01"});
    }
    if (sequence_parallel) {
      train.push_back("--sequence-parallel");
      plan.push_back("--sequence-parallel");
    }
    if (interleaved) {
      train.insert(train.end(), {"--schedule", "interleaved"});
      plan.insert(plan.end(), {"--schedule", "interleaved", "--virtual-stages", "2"});
    }
    if (full_recompute) {
      for (auto* command : {&train, &plan})
        command->insert(command->end(), {"--recompute", "full"});
    }
    if (microbatches > 1) {
      for (auto* command : {&train, &plan}) {
        command->insert(command->end(), {"--microbatches", std::to_string(microbatches)});
      }
    }
    const testing::Result trained = run_command(train);
    ASSERT_EQ(trained.status, 0) << trained.err;
    const testing::Result planned = run_command(plan);
    ASSERT_EQ(planned.status, 0) << planned.err;
    const auto summary = testing::json_lines(trained.out).back()["summary"];
    const auto candidate = nlohmann::json::parse(planned.out)["candidates"][0];
    const std::string where = mesh + " zero " + zero;
    const auto& rank0 = summary["ranks"][0];
    const auto& memory = candidate["memory_per_device"];
    // Every rank's model state, exactly, as its pipeline stage's devices are predicted to hold.
    const auto& by_stage = candidate["memory_by_stage"];
    const std::int64_t stages = degree("pipeline");
    ASSERT_EQ(by_stage.size(), static_cast<std::size_t>(stages)) << where;
    std::int64_t largest = 0;
    for (const auto& stage : by_stage)
      largest = std::max(largest, stage["total"].get<std::int64_t>());
    for (const auto& rank : summary["ranks"]) {
      const std::size_t stage = rank.contains("stage") ? rank["stage"].get<std::size_t>() : 0;
      const std::string which = where + " rank " + rank["rank"].dump();
      ASSERT_LT(stage, by_stage.size()) << which;
      EXPECT_EQ(rank["params_bytes"], by_stage[stage]["params"]) << which;
      EXPECT_EQ(rank["grads_bytes"], by_stage[stage]["grads"]) << which;
      EXPECT_EQ(rank["optimizer_bytes"], by_stage[stage]["optimizer"]) << which;
      EXPECT_EQ(rank["compute_copies_peak_bytes"], by_stage[stage]["compute_copies"]) << which;
      if (bf16) {
        EXPECT_GT(rank["compute_copies_peak_bytes"].get<std::int64_t>(), 0) << which;
      }
    }
    // The device reported is the stage with the largest total.
    EXPECT_EQ(memory["total"], largest) << where;
    nlohmann::json measured = nlohmann::json::object();
    for (const auto& [axis, bytes] : summary["comm_bytes_per_step"].items()) {
      if (bytes.get<std::int64_t>() != 0) measured[axis] = bytes;
    }
    EXPECT_EQ(measured, candidate["comm_bytes_per_step"]) << where;
    // Without a pipeline the activations' peak, exactly; a pipeline's first and last stage's.
    if (!summary.contains("pipeline")) {
      EXPECT_EQ(rank0["activations_peak_bytes"], memory["activations"]) << where;
    } else {
      const auto& peaks = summary["pipeline"]["peak_activation_bytes_per_stage"];
      const auto& predicted = candidate["activations_by_stage"];
      ASSERT_EQ(predicted.size(), peaks.size()) << where;
      for (std::size_t stage = 0; stage < peaks.size(); ++stage) {
        EXPECT_EQ(predicted[stage], peaks[stage]) << where << " stage " << stage;
      }
    }
  }
}

}  // namespace
}  // namespace shardwise::cli

namespace shardwise::cli {
namespace {

// One reader for a model file: `shardwise plan` counts exactly the parameters `shardwise train`
// builds, for the presets and for every trainer model file (the plan used to read such a file
// as a GPT-2 config.json, ignore block_size and take 1024 positions).
TEST(PlanCommand, CountsTheParametersTheTrainerBuildsForEveryModelFileItAccepts) {
  std::vector<std::string> models{"tiny", "small", "gpt2",
                                  testing::source_path("examples/models/gpt_micro.json")};
  int made = 0;
  for (const char* text : {R"({"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64,
                               "vocab_size": 256})",
                           R"({"vocab_size": 300, "block_size": 7, "n_embd": 48, "n_head": 3,
                               "n_layer": 3})",
                           R"({"n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 1,
                               "vocab_size": 256})"}) {
    const std::string path =
        ::testing::TempDir() + "trainer_model_" + std::to_string(made++) + ".json";
    std::ofstream(path) << text;
    models.push_back(path);
  }
  for (const std::string& model : models) {
    const testing::Result planned =
        run_command({"plan", "--model", model, "--devices", "1", "--global-batch", "1", "--seq",
                     "1", "--layout", "data=1", "--json"});
    ASSERT_EQ(planned.status, 0) << model << ": " << planned.err;
    const std::int64_t plan_count = nlohmann::json::parse(planned.out)["model"]["parameters"];
    std::int64_t built = 0;
    const auto definition = models::resolve_model(model, "--model").model;
    ASSERT_NE(definition, nullptr) << model;
    for (const train::ParameterSpec& p : definition->parameters()) {
      built += static_cast<std::int64_t>(num_elements(p.shape));
    }
    EXPECT_EQ(plan_count, built) << model;
    if (model == "gpt2" || model == "small") continue;  // built above; too large to train here
    const testing::Result trained = run_command(
        {"train", "--model", model, "--steps", "1", "--batch", "1", "--seq", "1", "--json",
         "--threads", "1"});  // oneDNN's own threads are OpenMP's, which TSan does not see
    ASSERT_EQ(trained.status, 0) << model << ": " << trained.err;
    EXPECT_EQ(testing::json_lines(trained.out).back()["summary"]["parameters"], plan_count)
        << model;
  }
  // Groups that divide none of tiny's sizes (uneven torch.chunk blocks): state bytes per rank
  // and bytes per axis, ZeRO 1 to 3, alone, with HSDP and with tensor parallelism.
  const std::string tiny = models[4];
  for (const auto& [mesh, zero, ranks, batch] :
       std::vector<std::tuple<std::string, std::string, int, int>>{{"fsdp=5", "3", 5, 5},
                                                                   {"fsdp=3", "1", 3, 6},
                                                                   {"fsdp=3", "2", 3, 6},
                                                                   {"data=2,fsdp=3", "3", 6, 6},
                                                                   {"fsdp=3,model=2", "3", 6, 6}}) {
    const int model = mesh.find("model=2") == std::string::npos ? 1 : 2;
    const testing::Result trained =
        run_command({"train", "--model", tiny, "--mesh", mesh, "--zero", zero, "--batch",
                     std::to_string(batch), "--steps", "1", "--json"});
    ASSERT_EQ(trained.status, 0) << trained.err;
    const testing::Result planned =
        run_command({"plan", "--model", tiny, "--devices", std::to_string(ranks), "--global-batch",
                     std::to_string(batch), "--seq", "64", "--micro-batch",
                     std::to_string(batch / (ranks / model)), "--precision", "fp32", "--layout",
                     mesh, "--zero", zero, "--json"});
    ASSERT_EQ(planned.status, 0) << planned.err;
    const auto summary = testing::json_lines(trained.out).back()["summary"];
    const auto candidate = nlohmann::json::parse(planned.out)["candidates"][0];
    const auto& rank0 = summary["ranks"][0];
    const auto& memory = candidate["memory_per_device"];
    EXPECT_EQ(rank0["params_bytes"], memory["params"]) << mesh << " zero " << zero;
    EXPECT_EQ(rank0["grads_bytes"], memory["grads"]) << mesh << " zero " << zero;
    EXPECT_EQ(rank0["optimizer_bytes"], memory["optimizer"]) << mesh << " zero " << zero;
    nlohmann::json measured = nlohmann::json::object();
    for (const auto& [axis, bytes] : summary["comm_bytes_per_step"].items()) {
      if (bytes.get<std::int64_t>() != 0) measured[axis] = bytes;
    }
    EXPECT_EQ(measured, candidate["comm_bytes_per_step"]) << mesh << " zero " << zero;
  }
}

TEST(PlanCommand, RefusesWhatTheTrainerRefusesInAModelFile) {
  const auto file = [](const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string extra = file("extra_key.json", R"({"n_layer": 2, "n_head": 2, "n_embd": 8,
      "block_size": 8, "vocab_size": 256, "n_positions": 1024})");
  const std::string odd = file("odd_heads.json", R"({"n_layer": 2, "n_head": 3, "n_embd": 8,
      "block_size": 8, "vocab_size": 256})");
  for (const std::string command : {"train", "plan"}) {
    std::vector<std::string> rest{"--steps", "1"};
    if (command == "plan") rest = {"--devices", "1", "--global-batch", "1", "--seq", "1"};
    std::vector<std::string> args{command, "--model", extra};
    args.insert(args.end(), rest.begin(), rest.end());
    expect_bad_input(args, "\"n_positions\" is not a field of the model");
    args[2] = odd;
    expect_bad_input(args, "n_embd 8 is not divisible by n_head 3");
  }
}

}  // namespace
}  // namespace shardwise::cli
