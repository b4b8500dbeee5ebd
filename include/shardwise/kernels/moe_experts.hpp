#pragma once
// A Mixture-of-Experts layer's experts, gated-SiLU MLPs, as grouped products: each token's k
// choices become rows sorted by expert (a token's rows in the order of its tokens), each expert
// multiplies its block of rows with one product per matrix (no padding to a capacity), and each
// token's output is the sum of its choices' outputs, each scaled by its weight. Every token
// reaches its experts (dropless).
//
// The weights as transformers 5 holds them (MixtralExperts, Qwen3MoeExperts): `gate_up`
// experts x (2 width) x hidden, each expert's gate rows then its up rows; `down` experts x hidden
// x width. An expert computes down (silu(gate x) * up x).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardwise::kernels {

// Where the choices go. Grouped row r is token token[r]'s choice choice[r] (t x k + j), and
// choice c's row is row[c]; expert e's rows are [offsets[e], offsets[e + 1]).
struct ExpertGroups {
  std::vector<std::size_t> offsets;
  std::vector<std::int32_t> token;
  std::vector<std::int32_t> choice;
  std::vector<std::int32_t> row;
  [[nodiscard]] std::size_t rows() const { return token.size(); }
  [[nodiscard]] std::size_t count(std::size_t expert) const {
    return offsets[expert + 1] - offsets[expert];
  }
};

// `chosen` (tokens x k) grouped by expert. InvalidArgument naming a choice outside [0, experts).
[[nodiscard]] ExpertGroups group_by_expert(const std::int32_t* chosen, std::size_t tokens,
                                           std::size_t k, std::size_t experts);

// What the experts keep for backward, rows() x: the tokens' rows grouped (hidden), the gate and up
// products side by side (2 width), the activation (width) and each row's output before its
// weight (hidden). Backward writes the gradients over them.
struct ExpertArrays {
  float* inputs = nullptr;
  float* gate_up = nullptr;
  float* activation = nullptr;
  float* outputs = nullptr;
};

// out (tokens x hidden) = sum over each token's choices of weight x expert(x). `weights` tokens
// x k, in the choices' order.
void experts_forward(float* out, const ExpertArrays& kept, const float* x, const float* gate_up,
                     const float* down, const float* weights, const ExpertGroups& groups,
                     std::size_t tokens, std::size_t hidden, std::size_t width, std::size_t k);

// From dout (tokens x hidden): dx += the tokens' gradients; dweights (tokens x k) = each
// choice's weight gradient; dgate_up and ddown += the experts' weights' gradients. The kept
// arrays are written over.
void experts_backward(float* dx, float* dweights, float* dgate_up, float* ddown, const float* dout,
                      const ExpertArrays& kept, const float* gate_up, const float* down,
                      const float* weights, const ExpertGroups& groups, std::size_t tokens,
                      std::size_t hidden, std::size_t width, std::size_t k);

}  // namespace shardwise::kernels
