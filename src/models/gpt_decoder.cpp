// The GPT's decoder: nanoGPT's forward (gpt.cpp) for the new positions only, each layer's keys
// and values kept in its cache; on a model axis each rank computes its heads and its part of the
// MLP (column- then row-parallel, Megatron-LM's split) and its rows of the vocabulary.
#include <algorithm>
#include <vector>

#include "detail/cached_decoder.hpp"
#include "detail/decoders.hpp"
#include "detail/gpt_layout.hpp"
#include "shardwise/kernels/cached_attention.hpp"
#include "shardwise/kernels/elementwise.hpp"
#include "shardwise/kernels/layernorm.hpp"
#include "shardwise/kernels/matmul.hpp"

namespace shardwise::models::detail {
namespace {

class GptDecoder final : public CachedDecoder {
 public:
  GptDecoder(const GptConfig& config, train::ParameterStore& store,
             const train::TensorParallel& tensor_parallel, std::size_t capacity)
      : CachedDecoder(tensor_parallel, config.vocab_size, config.block_size, capacity),
        config_(config),
        store_(store) {
    const auto t = static_cast<std::size_t>(tensor_parallel.degree());
    index_ = train::chunk_parameter_indices(GptDefinition(config_), store_, {0, config_.n_layer},
                                            tensor_parallel.degree());
    channels_ = config_.n_embd / t;
    heads_ = config_.n_head / t;
    width_ = 4 * config_.n_embd / t;
    const std::size_t cached = this->capacity() * channels_;
    keys_.assign(config_.n_layer * cached, 0);
    values_.assign(config_.n_layer * cached, 0);
  }

  [[nodiscard]] std::size_t cache_bytes() const override {
    std::size_t floats = keys_.size() + values_.size();
    for (const auto* v : {&x_, &normed_, &mean_, &rstd_, &qkv_, &att_, &projected_, &fc_, &gelu_})
      floats += v->size();
    return floats * sizeof(float) + local_logits_bytes();
  }

 private:
  float* param(std::size_t layer, std::size_t which) {
    return store_.value(index_[2 + layer * kPerLayer + which]);
  }

  void size_scratch(std::size_t rows) {
    const std::size_t C = config_.n_embd;
    if (x_.size() >= rows * C) return;
    for (auto* v : {&x_, &normed_, &projected_}) v->assign(rows * C, 0);
    for (auto* v : {&mean_, &rstd_}) v->assign(rows, 0);
    qkv_.assign(rows * 3 * channels_, 0);
    att_.assign(rows * channels_, 0);
    for (auto* v : {&fc_, &gelu_}) v->assign(rows * width_, 0);
  }

  void compute(const std::int32_t* tokens, std::size_t rows, std::size_t first_position,
               float* local_logits) override {
    size_scratch(rows);
    const std::size_t C = config_.n_embd, Cl = channels_, hd = C / config_.n_head;
    float* x = x_.data();
    // Each rank looks up the tokens of its vocabulary rows, the sum completes them; then the
    // positions' embeddings.
    tp().lookup(x, tokens, store_.value(index_[kWte]), rows, C, vocab_start(), vocab_local());
    tp().sum(x, rows * C);
    const float* wpe = store_.value(index_[kWpe]);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < C; ++c) x[r * C + c] += wpe[(first_position + r) * C + c];
    }
    const std::size_t cached = capacity() * Cl;
    for (std::size_t l = 0; l < config_.n_layer; ++l) {
      kernels::layernorm_forward(normed_.data(), mean_.data(), rstd_.data(), x, param(l, kLn1W),
                                 param(l, kLn1B), rows, C);
      kernels::matmul_forward(qkv_.data(), normed_.data(), param(l, kQkvW), param(l, kQkvB), rows,
                              C, 3 * Cl);
      float* keys = keys_.data() + l * cached;
      float* values = values_.data() + l * cached;
      for (std::size_t r = 0; r < rows; ++r) {
        const float* row = qkv_.data() + r * 3 * Cl;
        std::copy(row + Cl, row + 2 * Cl, keys + (first_position + r) * Cl);
        std::copy(row + 2 * Cl, row + 3 * Cl, values + (first_position + r) * Cl);
      }
      const kernels::CachedAttentionLayout layout{first_position, rows, heads_, heads_, hd,
                                                  3 * Cl,         Cl};
      kernels::cached_attention_forward(att_.data(), qkv_.data(), keys, values, layout);
      tp().row_parallel_forward(projected_.data(), att_.data(), param(l, kAttProjW),
                                param(l, kAttProjB), rows, Cl, C);
      kernels::residual_forward(x, x, projected_.data(), rows * C);
      kernels::layernorm_forward(normed_.data(), mean_.data(), rstd_.data(), x, param(l, kLn2W),
                                 param(l, kLn2B), rows, C);
      kernels::matmul_forward(fc_.data(), normed_.data(), param(l, kFcW), param(l, kFcB), rows, C,
                              width_);
      kernels::gelu_forward(gelu_.data(), fc_.data(), rows * width_);
      tp().row_parallel_forward(projected_.data(), gelu_.data(), param(l, kFcProjW),
                                param(l, kFcProjB), rows, width_, C);
      kernels::residual_forward(x, x, projected_.data(), rows * C);
    }
    // The head (tied to the token embedding) reads the last position only.
    const std::size_t last = 2 + config_.n_layer * kPerLayer;
    const float* x_last = x + (rows - 1) * C;
    kernels::layernorm_forward(normed_.data(), mean_.data(), rstd_.data(), x_last,
                               store_.value(index_[last]), store_.value(index_[last + 1]), 1, C);
    kernels::matmul_forward(local_logits, normed_.data(), store_.value(index_[kWte]), nullptr, 1, C,
                            vocab_local());
  }

  GptConfig config_;
  train::ParameterStore& store_;
  std::vector<std::size_t> index_;
  std::size_t channels_ = 0, heads_ = 0, width_ = 0;
  std::vector<float> keys_, values_;  // per layer, capacity x channels_
  std::vector<float> x_, normed_, mean_, rstd_, qkv_, att_, projected_, fc_, gelu_;
};

}  // namespace

std::unique_ptr<train::Decoder> make_gpt_decoder(const GptConfig& config,
                                                 train::ParameterStore& store,
                                                 const train::TensorParallel& tensor_parallel,
                                                 std::size_t capacity) {
  return std::make_unique<GptDecoder>(config, store, tensor_parallel, capacity);
}

}  // namespace shardwise::models::detail
