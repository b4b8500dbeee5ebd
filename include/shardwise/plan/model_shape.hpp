#pragma once
// What the planner's formulas need to know of a transformer: its exact parameter counts (from a
// model manifest, whatever its source) and its dimensions (from the config, or read off the
// manifest's shapes).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise::plan {

struct ModelShape {
  std::int64_t layers = 0;
  std::int64_t hidden = 0;    // h
  std::int64_t heads = 0;     // a (attention heads)
  std::int64_t kv_heads = 0;  // key and value heads (a without grouped-query attention)
  std::int64_t head_dim = 0;  // h / a for GPT-2 and most Llamas
  std::int64_t ffn = 0;       // the MLP's inner width (4h for GPT-2)
  std::int64_t vocab = 0;     // V
  // Llama's layout: SwiGLU (three matrices instead of two), RMSNorm without a bias, no learned
  // positions; shardwise's trainer keeps what its Llama keeps.
  bool gated_mlp = false;
  // The family's own statement of its parts, where the manifest carries one: the planner then
  // sizes activations from it rather than from gated_mlp.
  std::optional<TransformerShape> transformer;
  // Exact counts from the manifest.
  std::int64_t parameters = 0;        // every parameter
  std::int64_t layer_parameters = 0;  // one transformer layer's (the largest layer)
  std::int64_t layer_matmul_parameters =
      0;  // of which in matrices (tensor parallelism splits them)
  // Parameters that take part in matrix products per token: the layers' matrices and the
  // output head (the tied embedding where there is no head); not position embeddings. A Mixture
  // of Experts' stacked experts count k / experts of theirs (each token runs k), here and in
  // layer_matmul_parameters.
  std::int64_t matmul_parameters = 0;
  bool tied_embeddings = false;  // the output head is the token embedding
  // The longest sequence the model takes: the rows of its learned position embedding; 0 where
  // it has none (rotary positions, as Llama's, take any length).
  std::int64_t context = 0;
  // FSDP's units, in the order a forward pass uses them: the parameters before the layers
  // (embeddings), each layer, those after (final norm, head); each unit's parameter shapes.
  struct Unit {
    std::string name;
    bool layer = false;
    std::vector<Shape> shapes;
    // Per shape: the dimension tensor parallelism splits (Megatron-LM's layers: every matrix
    // but a position embedding, along its dimension that is not the hidden size, the first
    // where both are; every vector that is not hidden-sized: the column-parallel biases), or
    // -1 where each model rank holds it whole (norms, the row-parallel layers' biases). Empty:
    // unknown, the unit taken as split evenly (a shape written by hand).
    std::vector<int> model_split = {};
    // Per shape: the whole heads along its split dimension where they must stay whole (a
    // key/value projection's heads), 0 otherwise. A degree those heads do not divide, and that
    // they divide, holds one head on each degree / heads ranks (the heads replicated, as the
    // trainer holds them); empty: none.
    std::vector<std::int64_t> split_heads = {};
    // Per shape: whether the computation reads it outside a matrix product (a norm's weight, a
    // bias, a position table), which the trainer's bf16 reads as its rounding widened to
    // float32; empty: none.
    std::vector<bool> read_widened = {};
    // Per shape: whether it is a Mixture of Experts' stacked experts (its first logical axis
    // "experts"), which an expert axis splits along its first dimension; empty: none.
    std::vector<bool> experts = {};
    [[nodiscard]] std::int64_t elements() const;
    // The elements one of `degree` model ranks (and `expert_degree` expert ranks) holds
    // (rounded up where split evenly).
    [[nodiscard]] std::int64_t elements(std::int64_t degree, std::int64_t expert_degree = 1) const;
    // Those of them in stacked experts.
    [[nodiscard]] std::int64_t expert_elements(std::int64_t degree,
                                               std::int64_t expert_degree = 1) const;
    // The block of shape i one of `degree` model ranks (and `expert_degree` expert ranks) holds
    // (the shape where it is held whole; for a unit split evenly, its share as a vector).
    [[nodiscard]] Shape block(std::size_t i, std::int64_t degree,
                              std::int64_t expert_degree = 1) const;
    [[nodiscard]] bool is_experts(std::size_t i) const { return i < experts.size() && experts[i]; }
  };
  std::vector<Unit> units;

  // Whether `degree` model ranks hold the key/value heads replicated: their count divides the
  // degree without the degree dividing it (each head on degree / kv_heads ranks).
  [[nodiscard]] bool replicates_kv_heads(std::int64_t degree) const {
    return degree > 1 && kv_heads > 0 && kv_heads % degree != 0 && degree % kv_heads == 0;
  }
  // The key/value channels one model rank computes with: its kv_heads / degree heads, or one.
  [[nodiscard]] std::int64_t kv_width(std::int64_t degree) const {
    return (replicates_kv_heads(degree) ? 1 : kv_heads / degree) * head_dim;
  }

  // "12 layers, hidden 768, 12 heads, ffn 3072, vocab 50257, 124,439,808 parameters".
  [[nodiscard]] std::string to_string() const;
};

// The manifest's counts and dimensions. Dimensions come from the embedding matrix (vocab x h),
// the layers' MLP matrices (ffn) and the manifest's "heads" axis unit (the head dimension);
// `heads` gives the count where the manifest does not. Throws InvalidArgument naming what it
// could not find or what disagrees: no layers, no embedding matrix, heads unknown, `heads` not
// dividing h or differing from the manifest's, a head dimension not dividing the query width.
// `heads_field` names `heads` in messages (the command's flag, or the Python argument).
ModelShape shape_of(const ModelManifest& manifest, std::optional<std::int64_t> heads = std::nullopt,
                    const std::string& heads_field = "--heads");

// A manifest from the header of a .safetensors file: `header` is the JSON after the 8-byte
// length, `data_bytes` the bytes the file has after the header. Every tensor's dtype, shape and
// data offsets are checked (offsets inside the data, their length the shape's bytes, no two
// tensors' bytes overlapping); any violation is a ParseError naming the tensor.
ModelManifest manifest_from_safetensors_header(std::string_view header, std::uint64_t data_bytes);

}  // namespace shardwise::plan
