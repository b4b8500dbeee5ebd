#include "shardwise/models/hf_gpt2.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

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

void check_hf_gpt2_tensor(const ckpt::CheckpointReader& file, const std::string& hf_name,
                          const std::string& name, const Shape& shape) {
  detail::check_hf_tensor(file, hf_name, hf_gpt2_shape(name, shape),
                          "GPT-2's layout of " + name + " " + to_string(shape));
}

}  // namespace shardwise::models

namespace shardwise::models {

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
