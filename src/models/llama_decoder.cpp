// The Llama's decoder: the chunk's forward (llama_chunk.cpp) for the new positions only, each
// layer's rotated keys and values kept in its cache. On a model axis each rank computes its
// query heads, the key/value heads they read (split, or one replicated head: llama_shared_rows),
// its part of the MLP and its rows of the vocabulary.
#include <algorithm>
#include <vector>

#include "detail/cached_decoder.hpp"
#include "detail/decoders.hpp"
#include "detail/llama_layout.hpp"
#include "shardwise/kernels/cached_attention.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/kernels/rmsnorm.hpp"
#include "shardwise/kernels/rotary.hpp"
#include "shardwise/kernels/swiglu.hpp"

namespace shardwise::models::detail {
namespace {

class LlamaDecoder final : public CachedDecoder {
 public:
  LlamaDecoder(const LlamaConfig& config, train::ParameterStore& store,
               const train::TensorParallel& tensor_parallel, std::size_t capacity)
      : CachedDecoder(tensor_parallel, config.vocab_size, config.context_length, capacity),
        config_(config),
        store_(store) {
    const int degree = tensor_parallel.degree();
    const auto t = static_cast<std::size_t>(degree);
    index_ = train::chunk_parameter_indices(LlamaDefinition(config_), store_, {0, config_.n_layer},
                                            degree);
    heads_ = config_.n_head / t;
    kv_heads_ = replicates_kv_heads(config_, degree) ? 1 : config_.n_kv_head / t;
    q_width_ = heads_ * config_.head_dim;
    kv_width_ = kv_heads_ * config_.head_dim;
    mlp_ = config_.intermediate_size / t;
    rotary_ = kernels::RotaryTable(
        kernels::rotary_frequencies(config_.head_dim, config_.rope_theta, config_.rope_scaling),
        this->capacity());
    const std::size_t cached = this->capacity() * kv_width_;
    keys_.assign(config_.n_layer * cached, 0);
    values_.assign(config_.n_layer * cached, 0);
  }

  [[nodiscard]] std::size_t cache_bytes() const override {
    std::size_t floats = keys_.size() + values_.size();
    for (const auto* v : {&x_, &normed_, &rstd_, &q_, &att_, &projected_, &gate_, &up_, &act_})
      floats += v->size();
    return floats * sizeof(float) + local_logits_bytes();
  }

 private:
  float* value(std::size_t parameter) { return store_.value(index_[parameter]); }
  float* layer_value(std::size_t l, std::size_t which) {
    return value(llama_layer_param(l, which));
  }

  void size_scratch(std::size_t rows) {
    const std::size_t C = config_.hidden_size;
    if (x_.size() >= rows * C) return;
    for (auto* v : {&x_, &normed_, &projected_}) v->assign(rows * C, 0);
    rstd_.assign(rows, 0);
    for (auto* v : {&q_, &att_}) v->assign(rows * q_width_, 0);
    for (auto* v : {&gate_, &up_, &act_}) v->assign(rows * mlp_, 0);
  }

  void norm(float* out, const float* inp, const float* weight, std::size_t rows) {
    kernels::rmsnorm_forward(out, rstd_.data(), inp, weight,
                             static_cast<float>(config_.rms_norm_eps), rows, config_.hidden_size);
  }

  void compute(const std::int32_t* tokens, std::size_t rows, std::size_t first_position,
               float* local_logits) override {
    size_scratch(rows);
    const std::size_t C = config_.hidden_size;
    float* x = x_.data();
    tp().lookup(x, tokens, value(kEmbedTokens), rows, C, vocab_start(), vocab_local());
    tp().sum(x, rows * C);
    const std::size_t cached = capacity() * kv_width_;
    for (std::size_t l = 0; l < config_.n_layer; ++l) {
      norm(normed_.data(), x, layer_value(l, kInputNorm), rows);
      // The new positions' keys and values go straight into the cache, rotated there.
      float* keys = keys_.data() + l * cached + first_position * kv_width_;
      float* values = values_.data() + l * cached + first_position * kv_width_;
      kernels::matmul_forward(q_.data(), normed_.data(), layer_value(l, kQProj), nullptr, rows, C,
                              q_width_);
      kernels::matmul_forward(keys, normed_.data(), layer_value(l, kKProj), nullptr, rows, C,
                              kv_width_);
      kernels::matmul_forward(values, normed_.data(), layer_value(l, kVProj), nullptr, rows, C,
                              kv_width_);
      rotary_.rotate_positions(q_.data(), first_position, rows, heads_, q_width_);
      rotary_.rotate_positions(keys, first_position, rows, kv_heads_, kv_width_);
      const kernels::CachedAttentionLayout layout{first_position,   rows,     heads_,   kv_heads_,
                                                  config_.head_dim, q_width_, kv_width_};
      kernels::cached_attention_forward(att_.data(), q_.data(), keys_.data() + l * cached,
                                        values_.data() + l * cached, layout);
      tp().row_parallel_forward(projected_.data(), att_.data(), layer_value(l, kOProj), nullptr,
                                rows, q_width_, C);
      kernels::residual_forward(x, x, projected_.data(), rows * C);
      norm(normed_.data(), x, layer_value(l, kPostNorm), rows);
      kernels::matmul_forward(gate_.data(), normed_.data(), layer_value(l, kGateProj), nullptr,
                              rows, C, mlp_);
      kernels::matmul_forward(up_.data(), normed_.data(), layer_value(l, kUpProj), nullptr, rows, C,
                              mlp_);
      kernels::swiglu_forward(act_.data(), gate_.data(), up_.data(), rows * mlp_);
      tp().row_parallel_forward(projected_.data(), act_.data(), layer_value(l, kDownProj), nullptr,
                                rows, mlp_, C);
      kernels::residual_forward(x, x, projected_.data(), rows * C);
    }
    // The head reads the last position only.
    norm(normed_.data(), x + (rows - 1) * C, value(llama_final_norm(config_.n_layer)), 1);
    const std::size_t head =
        config_.tie_word_embeddings ? kEmbedTokens : llama_lm_head(config_.n_layer);
    kernels::matmul_forward(local_logits, normed_.data(), value(head), nullptr, 1, C,
                            vocab_local());
  }

  LlamaConfig config_;
  train::ParameterStore& store_;
  std::vector<std::size_t> index_;
  std::size_t heads_ = 0, kv_heads_ = 0, q_width_ = 0, kv_width_ = 0, mlp_ = 0;
  kernels::RotaryTable rotary_;
  std::vector<float> keys_, values_;  // per layer, capacity x kv_width_, rotated
  std::vector<float> x_, normed_, rstd_, q_, att_, projected_, gate_, up_, act_;
};

}  // namespace

std::unique_ptr<train::Decoder> make_llama_decoder(const LlamaConfig& config,
                                                   train::ParameterStore& store,
                                                   const train::TensorParallel& tensor_parallel,
                                                   std::size_t capacity) {
  return std::make_unique<LlamaDecoder>(config, store, tensor_parallel, capacity);
}

}  // namespace shardwise::models::detail
