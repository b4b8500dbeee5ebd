#pragma once
// Where the Llama's parameters sit in llama_parameters' order: the token embedding, then each
// layer's parameters in this order, then the final norm and (untied) the head.

#include <cstddef>

namespace shardwise::models::detail {

enum LlamaLayerParam : std::size_t {
  kInputNorm,
  kQProj,
  kKProj,
  kVProj,
  kOProj,
  kPostNorm,
  kGateProj,
  kUpProj,
  kDownProj,
  kLlamaPerLayer
};
constexpr std::size_t kEmbedTokens = 0;
constexpr std::size_t llama_layer_param(std::size_t layer, std::size_t which) {
  return 1 + layer * kLlamaPerLayer + which;
}
constexpr std::size_t llama_final_norm(std::size_t layers) { return 1 + layers * kLlamaPerLayer; }
constexpr std::size_t llama_lm_head(std::size_t layers) { return 2 + layers * kLlamaPerLayer; }

}  // namespace shardwise::models::detail
