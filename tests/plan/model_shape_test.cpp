// The planner's inputs: model descriptions to the shape the formulas need (exact parameter
// counts of GPT-2 and Llama 3 8B from their config.json, .safetensors headers with hostile ones
// refused), and clusters (presets, JSON files with bad values named).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "error_of.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/plan/cluster.hpp"
#include "shardwise/plan/model_shape.hpp"
#include "shardwise/train/parameter_store.hpp"

namespace shardwise::plan {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

TEST(ModelShape, Gpt2AndLlama3FromTheirConfigs) {
  const ModelShape gpt2 = shape_of(manifest_from_hf_config(
      R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
          "n_layer": 12, "n_head": 12})"));
  EXPECT_EQ(gpt2.parameters, 124'439'808);
  EXPECT_EQ(gpt2.layers, 12);
  EXPECT_EQ(gpt2.hidden, 768);
  EXPECT_EQ(gpt2.heads, 12);
  EXPECT_EQ(gpt2.ffn, 3072);
  EXPECT_EQ(gpt2.vocab, 50257);
  EXPECT_FALSE(gpt2.gated_mlp);
  // Matrices of the layers and the tied head; not the position embedding.
  EXPECT_EQ(gpt2.matmul_parameters, 12 * 12 * 768 * 768 + 50257 * 768);
  const ModelShape llama = shape_of(manifest_from_hf_config(
      R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
          "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_key_value_heads": 8})"));
  EXPECT_EQ(llama.parameters, 8'030'261'248);
  EXPECT_EQ(llama.heads, 32);
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(llama.ffn, 14336);
  EXPECT_TRUE(llama.gated_mlp);
  EXPECT_EQ(llama.units.back().elements(), 128256 * 4096 + 4096);  // lm_head and the final norm
}

std::string header_of(const std::string& tensors) { return "{" + tensors + "}"; }

// A Mixture of Experts' products per token are those of the k experts a token runs, not of every
// expert it holds: mixtral-tiny's (8 experts, 2 per token) counted by hand, against its whole
// parameters.
TEST(ModelShape, AMixtureOfExpertsCountsTheExpertsATokenRuns) {
  const models::LlamaDefinition mixtral(models::llama_preset("mixtral-tiny", "model"));
  const ModelShape shape = shape_of(mixtral.manifest());
  const std::int64_t C = 128, Q = 128, KV = 64, E = 8, k = 2, I = 88, V = 256, layers = 4;
  const std::int64_t attention = 2 * Q * C + 2 * KV * C;
  const std::int64_t layer = attention + E * C + k * 3 * I * C;
  EXPECT_EQ(shape.layer_matmul_parameters, layer);
  EXPECT_EQ(shape.matmul_parameters, layers * layer + V * C);
  EXPECT_EQ(shape.ffn, I);
  // Every expert still counts in the parameters the ranks hold.
  EXPECT_EQ(shape.parameters,
            static_cast<std::int64_t>(train::ParameterStore(mixtral.parameters()).values().size()));
  EXPECT_GT(shape.parameters, layers * (attention + E * C + E * 3 * I * C));
}

TEST(ModelShape, SafetensorsHeaders) {
  const std::string good = header_of(
      R"("__metadata__": {"format": "pt"},
         "transformer.wte.weight": {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 512]},
         "transformer.h.0.mlp.c_fc.weight": {"dtype": "BF16", "shape": [8, 32],
                                             "data_offsets": [512, 1024]})");
  const ModelManifest manifest = manifest_from_safetensors_header(good, 1024);
  ASSERT_EQ(manifest.parameters.size(), 2U);
  EXPECT_EQ(shape_of(manifest, 2).ffn, 32);
  EXPECT_THAT(error_of([&] { (void)shape_of(manifest); }), HasSubstr("--heads"));
  EXPECT_THAT(error_of([&] { (void)shape_of(manifest, 3); }),
              HasSubstr("--heads 3 does not divide the hidden size 8"));
  const ModelManifest empty_embedding = manifest_from_safetensors_header(
      header_of(R"("wte": {"dtype": "F32", "shape": [0, 8], "data_offsets": [0, 0]},
                   "h.0.mlp.fc": {"dtype": "F32", "shape": [8, 8], "data_offsets": [0, 256]})"),
      1024);
  EXPECT_THAT(error_of([&] { (void)shape_of(empty_embedding, 2); }),
              HasSubstr("expected vocab x hidden, both at least 1"));
  const ModelManifest no_layers = manifest_from_safetensors_header(
      header_of(R"("wte": {"dtype": "F32", "shape": [4, 8], "data_offsets": [0, 128]})"), 1024);
  EXPECT_THAT(error_of([&] { (void)shape_of(no_layers, 2); }),
              HasSubstr("no parameter with a layer index"));
  for (const auto& [header, expected] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "invalid JSON in the safetensors header"},
           {"[]", "not a JSON object"},
           {"{}", "lists no tensors"},
           {header_of(R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1})"),
            "needs exactly"},
           {header_of(R"("w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]})"),
            "dtype 'F8_E4M3'"},
           {header_of(R"("w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})"),
            "expected a non-negative integer"},
           {header_of(R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4096]})"),
            "inside the file's 1024 data bytes"},
           {header_of(R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})"),
            "data_offsets [8, 0]"},
           {header_of(R"("w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4],
                               "data_offsets": [0, 8]})"),
            "does not fit in a 64-bit integer"},
           {header_of(R"("w": {"dtype": "F32", "shape": [18446744073709551615],
                               "data_offsets": [0, 8]})"),
            "too large"},
           {header_of(R"("w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 8]})"),
            "invalid JSON in the safetensors header"},
           {header_of(R"("w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})"),
            "twice"}}) {
    EXPECT_THAT(error_of([&] { (void)manifest_from_safetensors_header(header, 1024); }),
                HasSubstr(expected))
        << header;
  }
}

}  // namespace
}  // namespace shardwise::plan

namespace shardwise::plan {
namespace {

TEST(Cluster, PresetsAndFilesWithTheirErrorsNamed) {
  const Cluster h100 = Cluster::preset("h100-80gb", 16, 8);
  EXPECT_EQ(h100.memory_bytes, std::int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(h100.peak_flops_bf16, 989.4e12);
  EXPECT_THAT(error_of([] { (void)Cluster::preset("h100-80gb", 12, 8); }),
              HasSubstr("devices 12 is not a whole number of nodes of 8"));
  EXPECT_THAT(error_of([] { (void)Cluster::preset("v100", 8, 8); }),
              HasSubstr("'v100' is not a preset"));
  const std::string good = R"({"name": "mine", "devices_per_node": 4, "memory_bytes": 1000,
      "peak_flops_fp32": 1e12, "peak_flops_bf16": 2e12,
      "intra_node": {"bandwidth": 1e11, "latency": 1e-6},
      "inter_node": {"bandwidth": 1e10, "latency": 0}})";
  const Cluster mine = Cluster::from_json(good, 8);
  EXPECT_EQ(mine.devices, 8);
  EXPECT_EQ(mine.devices_per_node, 4);
  EXPECT_DOUBLE_EQ(mine.inter_node.bandwidth, 1e10);
  for (const auto& [text, expected] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "not a JSON object"},
           {"{", "invalid JSON in the cluster file"},
           {R"({"devices": 8})", "unknown key \"devices\""},
           {R"({"devices_per_node": 2.5})", "\"devices_per_node\" is 2.5"},
           {R"({"devices_per_node": 1e300})", "expected a positive integer"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": -1,
                "peak_flops_bf16": 1, "intra_node": {"bandwidth": 1, "latency": 0},
                "inter_node": {"bandwidth": 1, "latency": 0}})",
            "peak_flops_fp32 is -1"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1e12,
                "peak_flops_bf16": 1e12, "intra_node": {"bandwidth": 1e9, "latency": -1},
                "inter_node": {"bandwidth": 1e9, "latency": 0}})",
            "intra_node latency is -1; expected 0 to 10 seconds"},
           // Values that would make a prediction infinite or NaN.
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1e12,
                "peak_flops_bf16": 1e12, "intra_node": {"bandwidth": 5e-324, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 0}})",
            "intra_node bandwidth is 4.94066e-324; expected 1000 to 1e+15 bytes/s"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1e-300,
                "peak_flops_bf16": 1e12, "intra_node": {"bandwidth": 1e9, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 0}})",
            "peak_flops_fp32 is 1e-300; expected 1e+06 to 1e+18 FLOP/s"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1e12,
                "peak_flops_bf16": 1e300, "intra_node": {"bandwidth": 1e9, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 1e300}})",
            "peak_flops_bf16 is 1e+300"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1e12,
                "peak_flops_bf16": 1e12, "intra_node": {"bandwidth": 1e9, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 1e300}})",
            "inter_node latency is 1e+300; expected 0 to 10 seconds"},
           {R"({"name": "a\u001b[31mred", "devices_per_node": 4, "memory_bytes": 1000,
                "peak_flops_fp32": 1e12, "peak_flops_bf16": 1e12,
                "intra_node": {"bandwidth": 1e9, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 0}})",
            "cluster name 'a\\x1b[31mred' is not 100 or fewer printable characters"},
           {R"({"name": 7, "devices_per_node": 4})", "cluster name"},
           {R"({"name": ")" + std::string(101, 'x') + R"(", "devices_per_node": 4,
                "memory_bytes": 1000, "peak_flops_fp32": 1e12, "peak_flops_bf16": 1e12,
                "intra_node": {"bandwidth": 1e9, "latency": 0},
                "inter_node": {"bandwidth": 1e9, "latency": 0}})",
            "is not 100 or fewer printable characters"},
           {R"({"devices_per_node": 4, "memory_bytes": 1000, "peak_flops_fp32": 1,
                "peak_flops_bf16": 1, "intra_node": {"bandwidth": 1, "latency": 0, "x": 1},
                "inter_node": {"bandwidth": 1, "latency": 0}})",
            "unknown key \"x\""},
           {R"({"devices_per_node": 4, "devices_per_node": 8})", "twice"}}) {
    EXPECT_THAT(error_of([&] { (void)Cluster::from_json(text, 8); }), HasSubstr(expected)) << text;
  }
}

}  // namespace
}  // namespace shardwise::plan
