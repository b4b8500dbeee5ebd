#pragma once
// Where the GPT's parameters sit in gpt_parameters' order: the two embeddings, then each layer's
// parameters in this order, then the final LayerNorm's two.

#include <cstddef>

namespace shardwise::models::detail {

// Per layer, in gpt_parameters order.
enum LayerParam : std::size_t {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kAttProjW,
  kAttProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB,
  kPerLayer
};
constexpr std::size_t kWte = 0;
constexpr std::size_t kWpe = 1;

}  // namespace shardwise::models::detail
