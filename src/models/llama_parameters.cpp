// The Llama's parameters (names, shapes, logical axes, initialisation) and the split over the
// model axis its layers compute with.
#include <utility>

#include "detail/llama_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {

using train::ParameterInit;
using train::ParameterSpec;

std::vector<ParameterSpec> llama_parameters(const LlamaConfig& c) {
  validate(c);
  const auto C = static_cast<std::int64_t>(c.hidden_size);
  const auto Q = static_cast<std::int64_t>(c.n_head * c.head_dim);
  const auto KV = static_cast<std::int64_t>(c.n_kv_head * c.head_dim);
  const auto F = static_cast<std::int64_t>(c.intermediate_size);
  const auto V = static_cast<std::int64_t>(c.vocab_size);
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.02F};
  const ParameterInit ones{ParameterInit::Kind::kOnes, 0};
  std::vector<ParameterSpec> specs{
      {"model.embed_tokens.weight", {V, C}, {"vocab", "embed"}, normal, true, "embeddings"}};
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string unit = "layers." + std::to_string(l);
    const std::string p = "model." + unit + ".";
    const auto add = [&](const std::string& name, Shape shape, std::vector<std::string> axes,
                         ParameterInit init, bool decay) {
      specs.push_back({p + name, std::move(shape), std::move(axes), init, decay, unit});
    };
    add("input_layernorm.weight", {C}, {"norm"}, ones, false);
    add("self_attn.q_proj.weight", {Q, C}, {"heads", "embed"}, normal, true);
    add("self_attn.k_proj.weight", {KV, C}, {"kv_heads", "embed"}, normal, true);
    add("self_attn.v_proj.weight", {KV, C}, {"kv_heads", "embed"}, normal, true);
    add("self_attn.o_proj.weight", {C, Q}, {"embed", "heads"}, normal, true);
    add("post_attention_layernorm.weight", {C}, {"norm"}, ones, false);
    add("mlp.gate_proj.weight", {F, C}, {"mlp", "embed"}, normal, true);
    add("mlp.up_proj.weight", {F, C}, {"mlp", "embed"}, normal, true);
    add("mlp.down_proj.weight", {C, F}, {"embed", "mlp"}, normal, true);
  }
  specs.push_back({"model.norm.weight", {C}, {"norm"}, ones, false, "head"});
  if (!c.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", {V, C}, {"vocab", "embed"}, normal, true, "head"});
  }
  return specs;
}

bool replicates_kv_heads(const LlamaConfig& c, int degree) {
  const auto t = static_cast<std::size_t>(degree);
  return degree > 1 && c.n_kv_head % t != 0 && t % c.n_kv_head == 0;
}

std::vector<train::SharedRows> llama_shared_rows(const LlamaConfig& c, int degree) {
  std::vector<train::SharedRows> shared;
  if (!replicates_kv_heads(c, degree)) return shared;
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    for (const std::size_t which : {detail::kKProj, detail::kVProj}) {
      shared.push_back({detail::llama_layer_param(l, which), c.n_kv_head});
    }
  }
  return shared;
}

std::vector<PartitionSpec> llama_model_placements(const LlamaConfig& c, int degree) {
  const std::vector<ParameterSpec> specs = llama_parameters(c);
  std::vector<PartitionSpec> placements(specs.size());
  if (degree == 1) return placements;
  if (degree < 1) {
    throw InvalidArgument("the model degree " + std::to_string(degree) + " is not positive");
  }
  const auto t = static_cast<std::size_t>(degree);
  for (const auto& [size, what] :
       {std::pair{c.n_head, std::string("attention heads (num_attention_heads)")},
        {c.intermediate_size, "MLP width (intermediate_size)"},
        {c.vocab_size, "vocabulary (vocab_size; Megatron-LM pads it, shardwise does not)"}}) {
    if (size % t != 0) {
      throw InvalidArgument("the model degree " + std::to_string(degree) + " does not divide the " +
                            std::to_string(size) + " " + what);
    }
  }
  const bool split_kv = c.n_kv_head % t == 0;
  if (!split_kv && !replicates_kv_heads(c, degree)) {
    throw InvalidArgument("the model degree " + std::to_string(degree) + " neither divides the " +
                          std::to_string(c.n_kv_head) +
                          " key/value heads (num_key_value_heads) nor is a multiple of them: "
                          "a rank's query heads would read two key/value heads' parts");
  }
  const PartitionSpec rows{"model"};           // column-parallel, and the vocabulary
  const PartitionSpec columns{None, "model"};  // row-parallel
  using namespace detail;
  placements[kEmbedTokens] = rows;
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    placements[llama_layer_param(l, kQProj)] = rows;
    if (split_kv) {
      placements[llama_layer_param(l, kKProj)] = rows;
      placements[llama_layer_param(l, kVProj)] = rows;
    }
    placements[llama_layer_param(l, kOProj)] = columns;
    placements[llama_layer_param(l, kGateProj)] = rows;
    placements[llama_layer_param(l, kUpProj)] = rows;
    placements[llama_layer_param(l, kDownProj)] = columns;
  }
  if (!c.tie_word_embeddings) placements[llama_lm_head(c.n_layer)] = rows;
  return placements;
}

}  // namespace shardwise::models
