// The Llama family's parameters (names, shapes, logical axes, initialisation) and the split over
// the model axis its layers compute with, in the order of the training layer's parts
// (train/transformer_spec.hpp): one list, so that the store, the placements and the shared rows
// cannot disagree on where a parameter is.
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

using train::ParameterInit;
using train::ParameterSpec;

// How a parameter is split over the model axis (Megatron-LM's layers): whole, by rows
// (column-parallel, and the vocabulary), by columns (row-parallel), for the key/value
// projections by rows where the degree divides their heads and else held by head (shared rows),
// or by experts (a Mixture of Experts' stacked experts, folded over the axis whole).
enum class Split { kWhole, kRows, kColumns, kKeyValueRows, kExperts };

struct Parameter {
  ParameterSpec spec;
  Split split = Split::kWhole;
};

std::vector<Parameter> llama_parameter_list(const LlamaConfig& c) {
  validate(c);
  const auto C = static_cast<std::int64_t>(c.hidden_size);
  const auto Q = static_cast<std::int64_t>(c.n_head * c.head_dim);
  const auto KV = static_cast<std::int64_t>(c.n_kv_head * c.head_dim);
  const auto D = static_cast<std::int64_t>(c.head_dim);
  const auto F = static_cast<std::int64_t>(c.intermediate_size);
  const auto V = static_cast<std::int64_t>(c.vocab_size);
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.02F};
  const ParameterInit ones{ParameterInit::Kind::kOnes, 0};
  const ParameterInit zeros{ParameterInit::Kind::kZeros, 0};
  const TransformerShape shape = llama_transformer(c).shape;
  std::vector<Parameter> list{
      {{"model.embed_tokens.weight", {V, C}, {"vocab", "embed"}, normal, true, "embeddings"},
       Split::kRows}};
  for (std::size_t l = 0; l < c.n_layer; ++l) {
    const std::string unit = "layers." + std::to_string(l);
    const std::string p = "model." + unit + ".";
    const auto add = [&](const std::string& name, Shape dims, std::vector<std::string> axes,
                         ParameterInit init, bool decay, Split split) {
      list.push_back({{p + name, std::move(dims), std::move(axes), init, decay, unit}, split});
    };
    add("input_layernorm.weight", {C}, {"norm"}, ones, false, Split::kWhole);
    for (const auto& [name, rows, axis, split] :
         {std::tuple{"q_proj", Q, "heads", Split::kRows},
          {"k_proj", KV, "kv_heads", Split::kKeyValueRows},
          {"v_proj", KV, "kv_heads", Split::kKeyValueRows}}) {
      add(std::string("self_attn.") + name + ".weight", {rows, C}, {axis, "embed"}, normal, true,
          split);
      if (shape.qkv_bias) {
        add(std::string("self_attn.") + name + ".bias", {rows}, {axis}, zeros, false, split);
      }
    }
    add("self_attn.o_proj.weight", {C, Q}, {"embed", "heads"}, normal, true, Split::kColumns);
    if (shape.attention_output_bias) {
      add("self_attn.o_proj.bias", {C}, {"norm"}, zeros, false, Split::kWhole);
    }
    if (shape.qk_norm) {
      add("self_attn.q_norm.weight", {D}, {"norm"}, ones, false, Split::kWhole);
      add("self_attn.k_norm.weight", {D}, {"norm"}, ones, false, Split::kWhole);
    }
    add("post_attention_layernorm.weight", {C}, {"norm"}, ones, false, Split::kWhole);
    if (has_experts(c.variant) && shape.moe_layer(l)) {
      // transformers 5's names and layouts (MixtralExperts, Qwen3MoeExperts): the router, then
      // each expert's gate and up rows stacked, then each expert's down.
      const auto E = static_cast<std::int64_t>(c.experts);
      const auto I = static_cast<std::int64_t>(c.expert_width);
      add("mlp.gate.weight", {E, C}, {"router", "embed"}, normal, true, Split::kWhole);
      // Each expert stays whole on one rank: its width is no "mlp" a tensor split would cut.
      add("mlp.experts.gate_up_proj", {E, 2 * I, C}, {"experts", "expert_mlp", "embed"}, normal,
          true, Split::kExperts);
      add("mlp.experts.down_proj", {E, C, I}, {"experts", "embed", "expert_mlp"}, normal, true,
          Split::kExperts);
      continue;
    }
    add("mlp.gate_proj.weight", {F, C}, {"mlp", "embed"}, normal, true, Split::kRows);
    add("mlp.up_proj.weight", {F, C}, {"mlp", "embed"}, normal, true, Split::kRows);
    add("mlp.down_proj.weight", {C, F}, {"embed", "mlp"}, normal, true, Split::kColumns);
  }
  list.push_back({{"model.norm.weight", {C}, {"norm"}, ones, false, "head"}, Split::kWhole});
  if (!c.tie_word_embeddings) {
    list.push_back(
        {{"lm_head.weight", {V, C}, {"vocab", "embed"}, normal, true, "head"}, Split::kRows});
  }
  return list;
}

}  // namespace

std::vector<ParameterSpec> llama_parameters(const LlamaConfig& c) {
  std::vector<ParameterSpec> specs;
  for (Parameter& p : llama_parameter_list(c)) specs.push_back(std::move(p.spec));
  return specs;
}

bool replicates_kv_heads(const LlamaConfig& c, int degree) {
  const auto t = static_cast<std::size_t>(degree);
  return degree > 1 && c.n_kv_head % t != 0 && t % c.n_kv_head == 0;
}

std::vector<train::SharedRows> llama_shared_rows(const LlamaConfig& c, int degree) {
  std::vector<train::SharedRows> shared;
  if (!replicates_kv_heads(c, degree)) return shared;
  const std::vector<Parameter> list = llama_parameter_list(c);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].split == Split::kKeyValueRows) shared.push_back({i, c.n_kv_head});
  }
  return shared;
}

std::vector<PartitionSpec> llama_model_placements(const LlamaConfig& c, int degree) {
  const std::vector<Parameter> list = llama_parameter_list(c);
  std::vector<PartitionSpec> placements(list.size());
  if (degree == 1) return placements;
  if (degree < 1) {
    throw InvalidArgument("the model degree " + std::to_string(degree) + " is not positive");
  }
  const auto t = static_cast<std::size_t>(degree);
  // A Mixture of Experts' experts are folded over the model axis whole (ExpertParallel): its
  // experts are split, and its MLP width only where dense layers have one.
  const bool experts = has_experts(c.variant);
  std::vector<std::pair<std::size_t, std::string>> splits{
      {c.n_head, "attention heads (num_attention_heads)"},
      {c.vocab_size, "vocabulary (vocab_size; Megatron-LM pads it, shardwise does not)"}};
  if (experts) splits.emplace_back(c.experts, "experts (num_local_experts, num_experts)");
  if (!experts || !c.dense_layers().empty()) {
    splits.emplace_back(c.intermediate_size, "MLP width (intermediate_size)");
  }
  for (const auto& [size, what] : splits) {
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
  const PartitionSpec rows{"model"};
  const PartitionSpec columns{None, "model"};
  for (std::size_t i = 0; i < list.size(); ++i) {
    switch (list[i].split) {
      case Split::kRows:
      case Split::kExperts: placements[i] = rows; break;
      case Split::kColumns: placements[i] = columns; break;
      case Split::kKeyValueRows:
        if (split_kv) placements[i] = rows;
        break;
      case Split::kWhole: break;
    }
  }
  return placements;
}

}  // namespace shardwise::models
