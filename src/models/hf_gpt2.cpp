#include "shardwise/models/hf_gpt2.hpp"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "../detail/json_reader.hpp"
#include "detail/hf_tensors.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::models {
namespace {

enum class Mapping {
  kSame,        // the same shape and layout
  kTransposed,  // (out, in) here, (in, out) there
  kQkvWeight,   // (3, C, C) here [q][out][in], (C, 3C) there [in][q * C + out]
  kQkvBias,     // (3, C) here, (3C) there: the same bytes
};

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

Mapping mapping_of(const std::string& name) {
  if (ends_with(name, ".attn.c_attn.weight")) return Mapping::kQkvWeight;
  if (ends_with(name, ".attn.c_attn.bias")) return Mapping::kQkvBias;
  if (ends_with(name, ".attn.c_proj.weight") || ends_with(name, ".mlp.c_fc.weight") ||
      ends_with(name, ".mlp.c_proj.weight")) {
    return Mapping::kTransposed;
  }
  return Mapping::kSame;
}

}  // namespace

Shape hf_gpt2_shape(const std::string& name, const Shape& shape) {
  switch (mapping_of(name)) {
    case Mapping::kTransposed: return {shape[1], shape[0]};
    case Mapping::kQkvWeight: return {shape[2], shape[0] * shape[1]};
    case Mapping::kQkvBias: return {shape[0] * shape[1]};
    case Mapping::kSame: break;
  }
  return shape;
}

std::vector<float> to_hf_gpt2(const std::string& name, const Shape& shape,
                              const std::vector<float>& values) {
  const Mapping mapping = mapping_of(name);
  if (mapping == Mapping::kSame || mapping == Mapping::kQkvBias) return values;
  std::vector<float> out(values.size());
  if (mapping == Mapping::kTransposed) {
    const auto rows = static_cast<std::size_t>(shape[0]);
    const auto cols = static_cast<std::size_t>(shape[1]);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
    }
    return out;
  }
  const auto c = static_cast<std::size_t>(shape[1]);
  const auto in = static_cast<std::size_t>(shape[2]);
  for (std::size_t q = 0; q < 3; ++q) {
    for (std::size_t o = 0; o < c; ++o) {
      for (std::size_t i = 0; i < in; ++i)
        out[i * 3 * c + q * c + o] = values[(q * c + o) * in + i];
    }
  }
  return out;
}

void read_hf_gpt2_block(const ckpt::CheckpointReader& file, const std::string& hf_name,
                        const std::string& name, const Shape& shape, const ShardIndex& box,
                        float* out) {
  check_hf_gpt2_tensor(file, hf_name, name, shape);
  switch (mapping_of(name)) {
    case Mapping::kSame: {
      const std::vector<float> values = detail::read_hf_floats(file, hf_name, box);
      std::memcpy(out, values.data(), values.size() * sizeof(float));
      return;
    }
    case Mapping::kTransposed: {
      // Their (in, out) box is ours swapped; its transpose is our block.
      const std::vector<float> values = detail::read_hf_floats(file, hf_name, {box[1], box[0]});
      const auto rows = static_cast<std::size_t>(box[0].size());
      const auto cols = static_cast<std::size_t>(box[1].size());
      for (std::size_t c = 0; c < cols; ++c) {
        for (std::size_t r = 0; r < rows; ++r) out[r * cols + c] = values[c * rows + r];
      }
      return;
    }
    case Mapping::kQkvWeight: {
      // One read per q/k/v our box takes: their columns q * C + [out range], rows [in range].
      const std::int64_t c = shape[1];
      const auto outs = static_cast<std::size_t>(box[1].size());
      const auto ins = static_cast<std::size_t>(box[2].size());
      for (std::int64_t q = box[0].start; q < box[0].stop; ++q) {
        const std::vector<float> values = detail::read_hf_floats(
            file, hf_name, {box[2], {q * c + box[1].start, q * c + box[1].stop}});
        float* slab = out + static_cast<std::size_t>(q - box[0].start) * outs * ins;
        for (std::size_t i = 0; i < ins; ++i) {
          for (std::size_t o = 0; o < outs; ++o) slab[o * ins + i] = values[i * outs + o];
        }
      }
      return;
    }
    case Mapping::kQkvBias: {
      const std::int64_t c = shape[1];
      const auto outs = static_cast<std::size_t>(box[1].size());
      for (std::int64_t q = box[0].start; q < box[0].stop; ++q) {
        const std::vector<float> values =
            detail::read_hf_floats(file, hf_name, {{q * c + box[1].start, q * c + box[1].stop}});
        std::memcpy(out + static_cast<std::size_t>(q - box[0].start) * outs, values.data(),
                    outs * sizeof(float));
      }
      return;
    }
  }
}

std::string hf_gpt2_config_json(const GptConfig& gpt) {
  const nlohmann::json config{{"architectures", {"GPT2LMHeadModel"}},
                              {"model_type", "gpt2"},
                              {"vocab_size", gpt.vocab_size},
                              {"n_positions", gpt.block_size},
                              {"n_ctx", gpt.block_size},
                              {"n_embd", gpt.n_embd},
                              {"n_layer", gpt.n_layer},
                              {"n_head", gpt.n_head},
                              {"n_inner", nullptr},
                              {"activation_function", "gelu_new"},
                              {"layer_norm_epsilon", 1e-5},
                              {"resid_pdrop", 0.0},
                              {"embd_pdrop", 0.0},
                              {"attn_pdrop", 0.0},
                              {"scale_attn_weights", true},
                              {"tie_word_embeddings", true},
                              {"bos_token_id", nullptr},
                              {"eos_token_id", nullptr}};
  return config.dump(2) + "\n";
}

namespace {

// What a GPT-2 config.json may say, by field: computed as shardwise's GPT computes (checked
// where a value would change that), or describing nothing the model computes (names, token
// ids, generation and fine-tuning settings; the dropouts, since shardwise trains without
// dropout). Any other field is refused, naming it: a model shardwise would compute otherwise
// must not load as if it were this one.
const std::set<std::string>& gpt2_config_fields() {
  static const std::set<std::string> fields{
      // The sizes, and the fields checked below.
      "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_ctx", "n_inner",
      "activation_function", "layer_norm_epsilon", "scale_attn_weights",
      "scale_attn_by_inverse_layer_idx", "add_cross_attention", "is_encoder_decoder",
      "tie_word_embeddings", "pruned_heads", "model_type",
      // Upcasts attention's scores to float32 in half-precision models: shardwise computes
      // them in float32 either way.
      "reorder_and_upcast_attn",
      // Training and fine-tuning heads' settings, names, token ids, outputs.
      "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout", "summary_type",
      "summary_use_proj", "summary_activation", "summary_proj_to_labels", "initializer_range",
      "architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
      "_num_labels", "id2label", "label2id", "problem_type", "bos_token_id", "eos_token_id",
      "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache", "task_specific_params",
      "tokenizer_class", "prefix", "output_attentions", "output_hidden_states", "return_dict",
      "use_return_dict", "gradient_checkpointing",
      // In the published gpt2-medium, -large and -xl configs and older transformers' ones:
      // special-token settings (n_special is checked to be 0) and framework switches.
      "n_special", "predict_special_tokens", "output_past", "is_decoder", "torchscript",
      "use_bfloat16", "num_labels", "chunk_size_feed_forward", "finetuning_task", "tf_legacy_loss",
      "tie_encoder_decoder", "cross_attention_hidden_size",
      // Generation's defaults, which configs of that age carry.
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  return fields;
}

bool is_true(const nlohmann::json& value) { return value.is_boolean() && value.get<bool>(); }
bool is_false(const nlohmann::json& value) { return value.is_boolean() && !value.get<bool>(); }

}  // namespace

GptConfig gpt_from_hf_config(const std::string& text, const std::string& what) {
  const nlohmann::json config = shardwise::detail::parse_json(text, what);
  if (!config.is_object()) throw InvalidArgument(what + " is not a JSON object");
  for (const auto& item : config.items()) {
    if (gpt2_config_fields().count(item.key()) == 0) {
      throw InvalidArgument(what + ": \"" + echo_input(item.key(), 60) +
                            "\" is a field shardwise's GPT-2 does not implement (a model that "
                            "sets it may compute otherwise)");
    }
  }
  const auto size = [&](const char* key) -> std::size_t {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() > (1U << 30)) {
      throw InvalidArgument(what + ": \"" + key + "\" is missing or not a size");
    }
    return it->get<std::size_t>();
  };
  const auto refuse = [&](const char* key, const nlohmann::json& value, const std::string& why) {
    throw InvalidArgument(what + ": \"" + key + "\" is " + echo_input(value.dump(), 40) + "; " +
                          why);
  };
  const auto field = [&](const char* key) -> const nlohmann::json* {
    const auto it = config.find(key);
    return it == config.end() ? nullptr : &*it;
  };
  GptConfig gpt{size("n_layer"), size("n_head"), size("n_embd"), size("n_positions"),
                size("vocab_size")};
  if (const nlohmann::json* v = field("model_type"); v != nullptr && *v != "gpt2") {
    refuse("model_type", *v, "expected \"gpt2\"");
  }
  if (const nlohmann::json* v = field("n_ctx");
      v != nullptr && !(v->is_number_unsigned() && v->get<std::size_t>() == gpt.block_size)) {
    refuse("n_ctx", *v, "expected n_positions, " + std::to_string(gpt.block_size));
  }
  if (const nlohmann::json* v = field("n_inner");
      v != nullptr && !v->is_null() &&
      !(v->is_number_unsigned() && v->get<std::size_t>() == 4 * gpt.n_embd)) {
    refuse("n_inner", *v, "shardwise's GPT has 4 x n_embd");
  }
  if (const nlohmann::json* v = field("activation_function");
      v != nullptr && *v != "gelu_new" && *v != "gelu_pytorch_tanh") {
    refuse("activation_function", *v, "shardwise's GPT computes GELU's tanh form (gelu_new)");
  }
  if (const nlohmann::json* v = field("layer_norm_epsilon");
      v != nullptr && (!v->is_number() || std::abs(v->get<double>() - 1e-5) > 1e-12)) {
    refuse("layer_norm_epsilon", *v, "shardwise's GPT uses 1e-5");
  }
  if (const nlohmann::json* v = field("scale_attn_weights"); v != nullptr && !is_true(*v)) {
    refuse("scale_attn_weights", *v,
           "shardwise's GPT scales attention's scores by 1/sqrt(head size), as true does");
  }
  if (const nlohmann::json* v = field("scale_attn_by_inverse_layer_idx");
      v != nullptr && !is_false(*v)) {
    refuse("scale_attn_by_inverse_layer_idx", *v,
           "shardwise's GPT does not scale attention by the layer's index");
  }
  for (const char* key : {"add_cross_attention", "is_encoder_decoder"}) {
    if (const nlohmann::json* v = field(key); v != nullptr && !is_false(*v)) {
      refuse(key, *v, "shardwise's GPT is a decoder without cross-attention");
    }
  }
  if (const nlohmann::json* v = field("n_special");
      v != nullptr && !(v->is_number_unsigned() && v->get<std::uint64_t>() == 0)) {
    refuse("n_special", *v,
           "shardwise's GPT has no special-token embeddings beside its vocabulary");
  }
  if (const nlohmann::json* v = field("tie_word_embeddings"); v != nullptr && !is_true(*v)) {
    refuse("tie_word_embeddings", *v, "shardwise's GPT ties them");
  }
  if (const nlohmann::json* v = field("pruned_heads");
      v != nullptr && !(v->is_object() && v->empty())) {
    refuse("pruned_heads", *v, "shardwise's GPT has every head of every layer");
  }
  models::validate(gpt);
  return gpt;
}

void check_hf_gpt2_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                          const std::string& name, const Shape& shape) {
  detail::check_hf_tensor(file, hf_name, hf_gpt2_shape(name, shape),
                          "GPT-2's layout of " + name + " " + to_string(shape));
}

}  // namespace shardwise::models

namespace shardwise::models {

std::shared_ptr<const train::ModelDefinition> HfGpt2Adapter::model_from_hf_config(
    const std::string& text, const std::string& what) const {
  return std::make_shared<GptDefinition>(gpt_from_hf_config(text, what));
}

std::string HfGpt2Adapter::hf_config_json(const train::ModelDefinition& model) const {
  const auto* gpt = dynamic_cast<const GptDefinition*>(&model);
  if (gpt == nullptr) {
    throw InvalidArgument("the hf-gpt2 format holds GPT models; this is " + model.describe());
  }
  return hf_gpt2_config_json(gpt->config());
}

// "transformer.h.0..." or, as the original GPT-2 files name them, "h.0...".
std::string HfGpt2Adapter::hf_name_of(const ckpt::CheckpointIndex& file,
                                      const std::string& name) const {
  if (file.find(name) != nullptr) return name;
  const std::string bare = name.substr(std::string("transformer.").size());
  if (file.find(bare) != nullptr) return bare;
  throw ckpt::CheckpointError("the file has no tensor '" + name + "' (nor '" + bare + "')");
}

// Buffers transformers recomputes, and the head, tied to the embedding.
bool HfGpt2Adapter::ignored_tensor(const std::string& hf_name) const {
  return hf_name.ends_with(".attn.bias") || hf_name.ends_with(".attn.masked_bias") ||
         hf_name == "lm_head.weight";
}

}  // namespace shardwise::models
