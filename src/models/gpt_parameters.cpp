// The GPT's parameters: presets, sizes, names, shapes and initialisation, and how tensor
// parallelism splits them (the split its layers compute with).
#include <algorithm>
#include <cmath>
#include <utility>

#include "detail/gpt_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/parameter_shardings.hpp"
#include "shardwise/train/placement.hpp"

namespace shardwise::models {
namespace {

using namespace detail;  // the parameters' order
using train::ParameterInit;
using train::ParameterSpec;

// Bounds that keep every size product far from overflow (docs/reliability.md).
constexpr std::size_t kMaxDimension = std::size_t{1} << 20;
constexpr std::size_t kMaxLayers = 10000;

const std::pair<const char*, GptConfig> kPresets[] = {{"tiny", {4, 4, 128, 64, 256}},
                                                      {"small", {6, 6, 384, 256, 256}},
                                                      {"gpt2", {12, 12, 768, 1024, 256}}};

}  // namespace

GptConfig gpt_preset(const std::string& name, const std::string& field) {
  for (const auto& [preset, config] : kPresets) {
    if (name == preset) return config;
  }
  throw InvalidArgument(field + ": '" + echo_input(name) +
                        "' is not a model (tiny, small, gpt2 or a JSON file)");
}

void validate(const GptConfig& c) {
  const auto check = [](std::size_t value, std::size_t most, const char* field) {
    if (value < 1 || value > most) {
      throw InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                            "; expected 1 to " + std::to_string(most));
    }
  };
  check(c.n_layer, kMaxLayers, "n_layer");
  check(c.n_head, kMaxDimension, "n_head");
  check(c.n_embd, kMaxDimension, "n_embd");
  check(c.block_size, kMaxDimension, "block_size");
  check(c.vocab_size, kMaxDimension, "vocab_size");
  if (c.n_embd % c.n_head != 0) {
    throw InvalidArgument("n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                          std::to_string(c.n_head));
  }
}

ModelManifest gpt_manifest(const GptConfig& c) {
  ModelManifest manifest = train::manifest_of(gpt_parameters(c));
  manifest.axis_units = {{"heads", static_cast<std::int64_t>(c.n_embd / c.n_head)}};
  manifest.transformer = gpt_transformer(c).shape;
  return manifest;
}

std::vector<ParameterSpec> gpt_parameters(const GptConfig& c) {
  validate(c);
  const auto C = static_cast<std::int64_t>(c.n_embd);
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.02F};
  // GPT-2's scaling of the projections into the residual stream.
  const ParameterInit residual{ParameterInit::Kind::kNormal,
                               0.02F / std::sqrt(2.0F * static_cast<float>(c.n_layer))};
  const ParameterInit zeros{ParameterInit::Kind::kZeros, 0};
  const ParameterInit ones{ParameterInit::Kind::kOnes, 0};
  std::vector<ParameterSpec> specs{
      {"transformer.wte.weight",
       {static_cast<std::int64_t>(c.vocab_size), C},
       {"vocab", "embed"},
       normal,
       true,
       "embeddings"},
      {"transformer.wpe.weight",
       {static_cast<std::int64_t>(c.block_size), C},
       {"positions", "embed"},
       normal,
       true,
       "embeddings"},
  };
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string unit = "h." + std::to_string(l);
    const std::string p = "transformer." + unit + ".";
    const auto add = [&](const std::string& name, Shape shape, std::vector<std::string> axes,
                         ParameterInit init, bool decay) {
      specs.push_back({p + name, std::move(shape), std::move(axes), init, decay, unit});
    };
    add("ln_1.weight", {C}, {"norm"}, ones, false);
    add("ln_1.bias", {C}, {"norm"}, zeros, false);
    // Q, K and V stacked: (3, C, C), so that splitting the heads (dimension 1) gives each rank
    // whole heads of all three, as a (3C / t, C) matrix whose products are its q, k and v.
    add("attn.c_attn.weight", {3, C, C}, {"qkv", "heads", "embed"}, normal, true);
    add("attn.c_attn.bias", {3, C}, {"qkv", "heads"}, zeros, false);
    add("attn.c_proj.weight", {C, C}, {"embed", "heads"}, residual, true);
    add("attn.c_proj.bias", {C}, {"embed"}, zeros, false);
    add("ln_2.weight", {C}, {"norm"}, ones, false);
    add("ln_2.bias", {C}, {"norm"}, zeros, false);
    add("mlp.c_fc.weight", {4 * C, C}, {"mlp", "embed"}, normal, true);
    add("mlp.c_fc.bias", {4 * C}, {"mlp"}, zeros, false);
    add("mlp.c_proj.weight", {C, 4 * C}, {"embed", "mlp"}, residual, true);
    add("mlp.c_proj.bias", {C}, {"embed"}, zeros, false);
  }
  specs.push_back({"transformer.ln_f.weight", {C}, {"norm"}, ones, false, "ln_f"});
  specs.push_back({"transformer.ln_f.bias", {C}, {"norm"}, zeros, false, "ln_f"});
  return specs;
}

std::vector<ParameterSpec> gpt_stage_parameters(const GptConfig& c, const GptStageRange& range) {
  std::vector<ParameterSpec> whole = gpt_parameters(c);
  if (range.first_layer >= range.end_layer || range.end_layer > c.n_layer) {
    throw InvalidArgument("a stage of layers " + std::to_string(range.first_layer) + " to " +
                          std::to_string(range.end_layer) + " of the model's " +
                          std::to_string(c.n_layer) +
                          "; expected at least one layer, within the model");
  }
  std::vector<ParameterSpec> held;
  const bool head = range.has_last(c.n_layer);
  for (std::size_t p = 0; p < whole.size(); ++p) {
    const bool layer = p >= 2 && p < 2 + c.n_layer * kPerLayer;
    const std::size_t l = layer ? (p - 2) / kPerLayer : 0;
    const bool keep = (p == kWte && (range.has_first() || head)) ||
                      (p == kWpe && range.has_first()) ||
                      (layer && l >= range.first_layer && l < range.end_layer) ||
                      (p >= 2 + c.n_layer * kPerLayer && head);
    if (keep) held.push_back(std::move(whole[p]));
  }
  return held;
}

std::vector<PartitionSpec> gpt_model_placements(const GptConfig& c, int degree) {
  std::vector<ParameterSpec> specs = gpt_parameters(c);
  std::vector<PartitionSpec> placements(specs.size());
  if (degree == 1) return placements;
  const auto t = static_cast<std::size_t>(degree);
  for (const auto& [size, what] :
       {std::pair{c.n_head, std::string("attention heads (n_head)")},
        {4 * c.n_embd, "MLP width (4 x n_embd)"},
        {c.vocab_size, "vocabulary (vocab_size; Megatron-LM pads it, shardwise does not)"}}) {
    if (degree < 1 || size % t != 0) {
      throw InvalidArgument("the model degree " + std::to_string(degree) + " does not divide the " +
                            std::to_string(size) + " " + what);
    }
  }
  const PartitionSpec rows{"model"};           // column-parallel, and the vocabulary
  const PartitionSpec columns{None, "model"};  // row-parallel, and Q, K, V's heads
  placements[kWte] = rows;
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::size_t at = 2 + l * kPerLayer;
    placements[at + kQkvW] = columns;
    placements[at + kQkvB] = columns;
    placements[at + kAttProjW] = columns;
    placements[at + kFcW] = rows;
    placements[at + kFcB] = rows;
    placements[at + kFcProjW] = columns;
  }
  return placements;
}

}  // namespace shardwise::models
