#include "hf_gpt2.hpp"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "../detail/json_reader.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise::cli {
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

// Elements of `dtype` to floats.
void to_floats(const std::vector<std::byte>& bytes, DType dtype, float* out) {
  const std::size_t n = bytes.size() / size_in_bytes(dtype);
  switch (dtype) {
    case DType::kF32: std::memcpy(out, bytes.data(), bytes.size()); return;
    case DType::kF64:
      for (std::size_t i = 0; i < n; ++i) {
        double v = 0;
        std::memcpy(&v, bytes.data() + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::kF16:
      for (std::size_t i = 0; i < n; ++i) {
        Float16 v;
        std::memcpy(&v, bytes.data() + i * 2, 2);
        out[i] = to_float(v);
      }
      return;
    case DType::kBF16:
      for (std::size_t i = 0; i < n; ++i) {
        BFloat16 v;
        std::memcpy(&v, bytes.data() + i * 2, 2);
        out[i] = to_float(v);
      }
      return;
    default:
      throw InvalidArgument("a GPT-2 weight of dtype " + to_string(dtype) +
                            "; expected F32, F64, F16 or BF16");
  }
}

// Reads `hf_box` of the file's tensor as floats.
std::vector<float> read_floats(const ckpt::CheckpointReader& file, const std::string& hf_name,
                               const ShardIndex& hf_box) {
  const ckpt::ArrayRecord* array = file.index().find(hf_name);
  std::uint64_t elements = 1;
  for (const IndexRange& range : hf_box) elements *= static_cast<std::uint64_t>(range.size());
  std::vector<std::byte> bytes(elements * size_in_bytes(array->dtype));
  const ckpt::BlockToLoad target{hf_name, array->shape, array->dtype, hf_box, bytes};
  (void)file.read({&target, 1});
  std::vector<float> values(elements);
  to_floats(bytes, array->dtype, values.data());
  return values;
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
  const ckpt::ArrayRecord* array = file.index().find(hf_name);
  const Shape expected = hf_gpt2_shape(name, shape);
  if (array == nullptr) throw ckpt::CheckpointError("the file has no tensor '" + hf_name + "'");
  if (array->shape != expected) {
    throw ckpt::CheckpointError("the file's '" + echo_input(hf_name, 200) + "' is " +
                                to_string(array->shape) + "; GPT-2's layout of " + name + " " +
                                to_string(shape) + " is " + to_string(expected));
  }
  switch (mapping_of(name)) {
    case Mapping::kSame: {
      const std::vector<float> values = read_floats(file, hf_name, box);
      std::memcpy(out, values.data(), values.size() * sizeof(float));
      return;
    }
    case Mapping::kTransposed: {
      // Their (in, out) box is ours swapped; its transpose is our block.
      const std::vector<float> values = read_floats(file, hf_name, {box[1], box[0]});
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
        const std::vector<float> values =
            read_floats(file, hf_name, {box[2], {q * c + box[1].start, q * c + box[1].stop}});
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
            read_floats(file, hf_name, {{q * c + box[1].start, q * c + box[1].stop}});
        std::memcpy(out + static_cast<std::size_t>(q - box[0].start) * outs, values.data(),
                    outs * sizeof(float));
      }
      return;
    }
  }
}

std::string hf_gpt2_config_json(const models::GptConfig& gpt) {
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

models::GptConfig gpt_from_hf_config(const std::string& text, const std::string& what) {
  const nlohmann::json config = shardwise::detail::parse_json(text, what);
  if (!config.is_object()) throw InvalidArgument(what + " is not a JSON object");
  const auto size = [&](const char* key) -> std::size_t {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() > (1U << 30)) {
      throw InvalidArgument(what + ": \"" + key + "\" is missing or not a size");
    }
    return it->get<std::size_t>();
  };
  models::GptConfig gpt{size("n_layer"), size("n_head"), size("n_embd"), size("n_positions"),
                        size("vocab_size")};
  if (const auto inner = config.find("n_inner");
      inner != config.end() && !inner->is_null() &&
      !(inner->is_number_unsigned() && inner->get<std::size_t>() == 4 * gpt.n_embd)) {
    throw InvalidArgument(what + ": \"n_inner\" is " + echo_input(inner->dump(), 40) +
                          "; shardwise's GPT has 4 x n_embd");
  }
  if (const auto activation = config.find("activation_function"); activation != config.end()) {
    if (*activation != "gelu_new" && *activation != "gelu_pytorch_tanh") {
      throw InvalidArgument(what + ": \"activation_function\" is " +
                            echo_input(activation->dump(), 40) +
                            "; shardwise's GPT computes GELU's tanh form (gelu_new)");
    }
  }
  if (const auto eps = config.find("layer_norm_epsilon"); eps != config.end()) {
    if (!eps->is_number() || std::abs(eps->get<double>() - 1e-5) > 1e-12) {
      throw InvalidArgument(what + ": \"layer_norm_epsilon\" is " + echo_input(eps->dump(), 40) +
                            "; shardwise's GPT uses 1e-5");
    }
  }
  if (const auto tied = config.find("tie_word_embeddings");
      tied != config.end() && *tied == false) {
    throw InvalidArgument(what + ": \"tie_word_embeddings\" is false; shardwise's GPT ties them");
  }
  models::validate(gpt);
  return gpt;
}

}  // namespace shardwise::cli
