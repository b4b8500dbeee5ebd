#include "conv_lm.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include <shardwise/core/error.hpp>
#include <shardwise/train/parameter_shardings.hpp>

namespace conv_lm {
namespace {

using shardwise::InvalidArgument;
using shardwise::PartitionSpec;
using shardwise::train::GradientsReady;
using shardwise::train::LayerRange;
using shardwise::train::ParameterInit;
using shardwise::train::ParameterSpec;
using shardwise::train::ParameterStore;

std::string layer_name(std::size_t l, const char* what) {
  return "layers." + std::to_string(l) + "." + what;
}

// One chunk: layers [first, end), the embedding where first is 0, the head where end is the
// last. Plain loops: the model is small, and the point is the plug-in, not the kernels.
class ConvLmChunk final : public shardwise::train::ModelChunk {
 public:
  ConvLmChunk(const ConvLmConfig& config, ParameterStore& store,
              const shardwise::train::ChunkOptions& options)
      : c_(config), store_(store), range_(options.range), tp_(options.tensor_parallel) {
    const auto t = static_cast<std::size_t>(tp_.degree());
    if (c_.n_hidden % t != 0) {
      throw InvalidArgument("n_hidden " + std::to_string(c_.n_hidden) + " does not divide among " +
                            std::to_string(t) + " model ranks");
    }
    hidden_ = c_.n_hidden / t;
    if (range_.has_first()) embed_ = store_.index_of("embed.weight");
    for (std::size_t l = range_.first_layer; l < range_.end_layer; ++l) {
      layers_.push_back({store_.index_of(layer_name(l, "mix.weight")),
                         store_.index_of(layer_name(l, "mix.bias")),
                         store_.index_of(layer_name(l, "out.weight")),
                         store_.index_of(layer_name(l, "out.bias"))});
    }
    if (range_.has_last(c_.n_layer)) {
      head_ = store_.index_of("head.weight");
      head_bias_ = store_.index_of("head.bias");
    }
  }

  [[nodiscard]] std::size_t boundary_elements(std::size_t batch, std::size_t seq) const override {
    return batch * seq * c_.n_embd;
  }

  float forward(std::size_t slot_index, std::span<const std::int32_t> tokens,
                std::span<const std::int32_t> targets, std::size_t batch, std::size_t seq,
                std::span<const float> input, std::span<float> output,
                bool /*backward_follows*/) override {
    Slot& s = slot(slot_index);
    const std::size_t rows = batch * seq;
    const std::size_t C = c_.n_embd;
    s.batch = batch;
    s.seq = seq;
    s.xs.assign(layers_.size() + 1, std::vector<float>(rows * C));
    s.us.assign(layers_.size(), std::vector<float>(rows * hidden_));
    if (range_.has_first()) {
      s.tokens.assign(tokens.begin(), tokens.end());
      const Unit unit(store_, embed_);
      const float* e = store_.value(embed_);
      for (std::size_t r = 0; r < rows; ++r) {
        const auto token = static_cast<std::size_t>(tokens[r]);
        if (token >= c_.vocab_size) throw InvalidArgument("a token outside the vocabulary");
        std::copy_n(e + token * C, C, s.xs[0].data() + r * C);
      }
    } else {
      std::copy(input.begin(), input.end(), s.xs[0].begin());
    }
    for (std::size_t k = 0; k < layers_.size(); ++k) layer_forward(s, k);
    const std::vector<float>& x = s.xs.back();
    if (!range_.has_last(c_.n_layer)) {
      std::copy(x.begin(), x.end(), output.begin());
      return 0;
    }
    s.targets.assign(targets.begin(), targets.end());
    const Unit unit(store_, head_);
    const float* w = store_.value(head_);
    const float* b = store_.value(head_bias_);
    const std::size_t V = c_.vocab_size;
    s.probs.assign(rows * V, 0);
    double loss = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      float* p = s.probs.data() + r * V;
      float most = -INFINITY;
      for (std::size_t v = 0; v < V; ++v) {
        float z = b[v];
        for (std::size_t i = 0; i < C; ++i) z += w[v * C + i] * x[r * C + i];
        p[v] = z;
        most = std::max(most, z);
      }
      double sum = 0;
      for (std::size_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(p[v] - most));
      for (std::size_t v = 0; v < V; ++v) {
        p[v] = static_cast<float>(std::exp(static_cast<double>(p[v] - most)) / sum);
      }
      loss -= std::log(std::max(static_cast<double>(p[targets[r]]), 1e-30));
    }
    return static_cast<float>(loss / static_cast<double>(rows));
  }

  void backward(std::size_t slot_index, std::span<const float> output_grad,
                std::span<float> input_grad, float loss_scale,
                const GradientsReady& ready) override {
    Slot& s = slot(slot_index);
    const std::size_t rows = s.batch * s.seq;
    const std::size_t C = c_.n_embd;
    std::vector<float> dx(rows * C, 0.0F);
    if (range_.has_last(c_.n_layer)) {
      const Unit unit(store_, head_);
      const float* w = store_.value(head_);
      float* dw = store_.grad(head_);
      float* db = store_.grad(head_bias_);
      const std::size_t V = c_.vocab_size;
      const float scale = loss_scale / static_cast<float>(rows);
      const std::vector<float>& x = s.xs.back();
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t v = 0; v < V; ++v) {
          const float d =
              (s.probs[r * V + v] - (static_cast<std::size_t>(s.targets[r]) == v ? 1.0F : 0.0F)) *
              scale;
          db[v] += d;
          for (std::size_t i = 0; i < C; ++i) {
            dw[v * C + i] += d * x[r * C + i];
            dx[r * C + i] += d * w[v * C + i];
          }
        }
      }
      announce(ready, head_);
    } else {
      std::copy(output_grad.begin(), output_grad.end(), dx.begin());
    }
    for (std::size_t k = layers_.size(); k-- > 0;) {
      layer_backward(s, k, dx);
      announce(ready, layers_[k].mix_w);
    }
    if (range_.has_first()) {
      const Unit unit(store_, embed_);
      float* de = store_.grad(embed_);
      for (std::size_t r = 0; r < rows; ++r) {
        const auto token = static_cast<std::size_t>(s.tokens[r]);
        for (std::size_t i = 0; i < C; ++i) de[token * C + i] += dx[r * C + i];
      }
      announce(ready, embed_);
    } else {
      std::copy(dx.begin(), dx.end(), input_grad.begin());
    }
  }

  [[nodiscard]] std::size_t activation_bytes() const override {
    std::size_t floats = 0;
    for (const Slot& s : slots_) {
      for (const auto& x : s.xs) floats += x.size();
      for (const auto& u : s.us) floats += u.size();
      floats += s.probs.size();
    }
    return floats * sizeof(float);
  }

 private:
  struct Layer {
    std::size_t mix_w, mix_b, out_w, out_b;
  };
  struct Slot {
    std::size_t batch = 0, seq = 0;
    std::vector<std::int32_t> tokens, targets;
    std::vector<std::vector<float>> xs;  // each layer's input, then the chunk's output
    std::vector<std::vector<float>> us;  // each layer's pre-activation (this rank's width)
    std::vector<float> probs;            // the head's softmax
  };
  // A unit gathered for the scope (ZeRO-3; nothing otherwise).
  class Unit {
   public:
    Unit(ParameterStore& store, std::size_t parameter)
        : store_(store), unit_(store.unit_of(parameter)) {
      store_.gather(unit_);
    }
    ~Unit() { store_.release(unit_); }
    Unit(const Unit&) = delete;
    Unit& operator=(const Unit&) = delete;

   private:
    ParameterStore& store_;
    std::size_t unit_;
  };

  Slot& slot(std::size_t index) {
    if (index >= slots_.size()) slots_.resize(index + 1);
    return slots_[index];
  }

  void announce(const GradientsReady& ready, std::size_t parameter) const {
    if (!ready) return;
    const shardwise::train::ParameterUnit& unit = store_.units()[store_.unit_of(parameter)];
    ready(unit.offset, unit.offset + unit.count);
  }

  // [x_t, x_{t-1}] of row r (zeros before a sequence's first position), 2C floats.
  void mixed_input(const Slot& s, const std::vector<float>& x, std::size_t r, float* a) const {
    const std::size_t C = c_.n_embd;
    std::copy_n(x.data() + r * C, C, a);
    if (r % s.seq == 0) {
      std::fill_n(a + C, C, 0.0F);
    } else {
      std::copy_n(x.data() + (r - 1) * C, C, a + C);
    }
  }

  void layer_forward(Slot& s, std::size_t k) {
    const Layer& p = layers_[k];
    const Unit unit(store_, p.mix_w);
    const float* w1 = store_.value(p.mix_w);
    const float* b1 = store_.value(p.mix_b);
    const float* w2 = store_.value(p.out_w);
    const float* b2 = store_.value(p.out_b);
    const std::size_t C = c_.n_embd;
    const std::size_t F = hidden_;
    const std::size_t rows = s.batch * s.seq;
    const std::vector<float>& x = s.xs[k];
    std::vector<float>& u = s.us[k];
    std::vector<float> y(rows * C, 0.0F);
    std::vector<float> a(2 * C);
    for (std::size_t r = 0; r < rows; ++r) {
      mixed_input(s, x, r, a.data());
      for (std::size_t f = 0; f < F; ++f) {
        float z = b1[f];
        for (std::size_t i = 0; i < 2 * C; ++i) z += w1[f * 2 * C + i] * a[i];
        u[r * F + f] = z;
        const float g = std::max(z, 0.0F);
        for (std::size_t o = 0; o < C; ++o) y[r * C + o] += w2[o * F + f] * g;
      }
    }
    tp_.sum(y.data(), y.size());  // the row-parallel product's parts
    std::vector<float>& next = s.xs[k + 1];
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t o = 0; o < C; ++o) next[r * C + o] = x[r * C + o] + y[r * C + o] + b2[o];
    }
  }

  // dx: the gradient of the layer's output on entry, of its input on return.
  void layer_backward(Slot& s, std::size_t k, std::vector<float>& dx) {
    const Layer& p = layers_[k];
    const Unit unit(store_, p.mix_w);
    const float* w1 = store_.value(p.mix_w);
    const float* w2 = store_.value(p.out_w);
    float* dw1 = store_.grad(p.mix_w);
    float* db1 = store_.grad(p.mix_b);
    float* dw2 = store_.grad(p.out_w);
    float* db2 = store_.grad(p.out_b);
    const std::size_t C = c_.n_embd;
    const std::size_t F = hidden_;
    const std::size_t rows = s.batch * s.seq;
    const std::vector<float>& x = s.xs[k];
    const std::vector<float>& u = s.us[k];
    std::vector<float> da(rows * 2 * C, 0.0F);
    std::vector<float> a(2 * C);
    for (std::size_t r = 0; r < rows; ++r) {
      mixed_input(s, x, r, a.data());
      const float* dy = dx.data() + r * C;
      for (std::size_t o = 0; o < C; ++o) db2[o] += dy[o];
      for (std::size_t f = 0; f < F; ++f) {
        const float g = std::max(u[r * F + f], 0.0F);
        float dg = 0;
        for (std::size_t o = 0; o < C; ++o) {
          dw2[o * F + f] += dy[o] * g;
          dg += dy[o] * w2[o * F + f];
        }
        const float du = u[r * F + f] > 0 ? dg : 0.0F;
        db1[f] += du;
        for (std::size_t i = 0; i < 2 * C; ++i) {
          dw1[f * 2 * C + i] += du * a[i];
          da[r * 2 * C + i] += du * w1[f * 2 * C + i];
        }
      }
    }
    tp_.sum(da.data(), da.size());  // the column-parallel layer's input gradient
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t i = 0; i < C; ++i) {
        dx[r * C + i] += da[r * 2 * C + i];
        if ((r + 1) % s.seq != 0) dx[r * C + i] += da[(r + 1) * 2 * C + C + i];
      }
    }
  }

  ConvLmConfig c_;
  ParameterStore& store_;
  LayerRange range_;
  shardwise::train::TensorParallel tp_;
  std::size_t hidden_ = 0;  // this rank's share of n_hidden
  std::size_t embed_ = 0, head_ = 0, head_bias_ = 0;
  std::vector<Layer> layers_;
  std::vector<Slot> slots_;
};

}  // namespace

ConvLmDefinition::ConvLmDefinition(ConvLmConfig config) : config_(config) {
  for (const auto& [value, field] : {std::pair{config_.n_layer, "n_layer"},
                                     {config_.n_embd, "n_embd"},
                                     {config_.n_hidden, "n_hidden"},
                                     {config_.context, "context"},
                                     {config_.vocab_size, "vocab_size"}}) {
    if (value < 1 || value > 4096) {
      throw InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                            "; expected 1 to 4096");
    }
  }
}

std::string ConvLmDefinition::config_json() const {
  return R"({"family":"conv-lm","n_layer":)" + std::to_string(config_.n_layer) + R"(,"n_embd":)" +
         std::to_string(config_.n_embd) + R"(,"n_hidden":)" + std::to_string(config_.n_hidden) +
         R"(,"context":)" + std::to_string(config_.context) + R"(,"vocab_size":)" +
         std::to_string(config_.vocab_size) + "}";
}

std::string ConvLmDefinition::describe() const {
  return "a convolutional LM of " + std::to_string(config_.n_layer) + " layers x " +
         std::to_string(config_.n_embd) + " wide";
}

std::vector<ParameterSpec> ConvLmDefinition::parameters() const {
  const auto C = static_cast<std::int64_t>(config_.n_embd);
  const auto F = static_cast<std::int64_t>(config_.n_hidden);
  const auto V = static_cast<std::int64_t>(config_.vocab_size);
  const ParameterInit normal{ParameterInit::Kind::kNormal, 0.02F};
  const ParameterInit residual{ParameterInit::Kind::kNormal,
                               0.02F / std::sqrt(2.0F * static_cast<float>(config_.n_layer))};
  const ParameterInit zeros{ParameterInit::Kind::kZeros, 0};
  std::vector<ParameterSpec> specs;
  specs.push_back({"embed.weight", {V, C}, {"tokens", "embed"}, normal, true, "embed"});
  for (std::size_t l = 0; l < config_.n_layer; ++l) {
    const std::string unit = "layers." + std::to_string(l);
    // The mixing MLP: column-parallel in, row-parallel out (Megatron-LM's split).
    specs.push_back(
        {layer_name(l, "mix.weight"), {F, 2 * C}, {"mlp", "embed"}, normal, true, unit});
    specs.push_back({layer_name(l, "mix.bias"), {F}, {"mlp"}, zeros, false, unit});
    specs.push_back({layer_name(l, "out.weight"), {C, F}, {"embed", "mlp"}, residual, true, unit});
    specs.push_back({layer_name(l, "out.bias"), {C}, {"embed"}, zeros, false, unit});
  }
  specs.push_back({"head.weight", {V, C}, {"tokens", "embed"}, normal, true, "head"});
  specs.push_back({"head.bias", {V}, {"tokens"}, zeros, false, "head"});
  return specs;
}

std::vector<std::int64_t> ConvLmDefinition::parameter_layers() const {
  std::vector<std::int64_t> layers{-1};
  for (std::size_t l = 0; l < config_.n_layer; ++l) {
    layers.insert(layers.end(), 4, static_cast<std::int64_t>(l));
  }
  layers.insert(layers.end(), 2, -1);
  return layers;
}

std::vector<std::string> ConvLmDefinition::chunk_parameters(const LayerRange& range) const {
  std::vector<std::string> names;
  if (range.has_first()) names.push_back("embed.weight");
  for (std::size_t l = range.first_layer; l < range.end_layer; ++l) {
    for (const char* what : {"mix.weight", "mix.bias", "out.weight", "out.bias"}) {
      names.push_back(layer_name(l, what));
    }
  }
  if (range.has_last(config_.n_layer)) {
    names.push_back("head.weight");
    names.push_back("head.bias");
  }
  return names;
}

std::vector<PartitionSpec> ConvLmDefinition::model_placements(int degree) const {
  std::vector<PartitionSpec> placements(parameters().size());
  if (degree == 1) return placements;
  if (degree < 1 || config_.n_hidden % static_cast<std::size_t>(degree) != 0) {
    throw InvalidArgument("the model degree " + std::to_string(degree) +
                          " does not divide n_hidden " + std::to_string(config_.n_hidden));
  }
  for (std::size_t l = 0; l < config_.n_layer; ++l) {
    const std::size_t at = 1 + 4 * l;
    placements[at] = PartitionSpec{"model"};                       // mix.weight's rows
    placements[at + 1] = PartitionSpec{"model"};                   // mix.bias
    placements[at + 2] = PartitionSpec{shardwise::None, "model"};  // out.weight's columns
  }
  return placements;
}

shardwise::ModelManifest ConvLmDefinition::manifest() const {
  return shardwise::train::manifest_of(parameters());
}

std::vector<double> ConvLmDefinition::layer_flops(std::size_t /*seq*/) const {
  const auto C = static_cast<double>(config_.n_embd);
  const auto F = static_cast<double>(config_.n_hidden);
  return std::vector<double>(config_.n_layer, 2 * (2 * C * F) + 2 * (F * C));
}

double ConvLmDefinition::head_flops() const {
  return 2 * static_cast<double>(config_.vocab_size) * static_cast<double>(config_.n_embd);
}

void ConvLmDefinition::check_options(bool sequence_parallel, shardwise::Recompute recompute,
                                     const std::string& field) const {
  if (sequence_parallel) {
    throw InvalidArgument(field + ": the convolutional LM does not split its sequence");
  }
  if (recompute == shardwise::Recompute::kFull) {
    throw InvalidArgument(field +
                          ": the convolutional LM keeps its activations (no full "
                          "recomputation)");
  }
}

std::unique_ptr<shardwise::train::ModelChunk> ConvLmDefinition::build_chunk(
    ParameterStore& store, const shardwise::train::ChunkOptions& options) const {
  return std::make_unique<ConvLmChunk>(config_, store, options);
}

}  // namespace conv_lm
