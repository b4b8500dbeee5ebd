#pragma once
// A Mixture-of-Experts layer's rows: each token's k choices become rows grouped by expert (a
// token's rows in the order of its tokens), so that each expert multiplies its block of rows with
// one product per matrix (no padding to a capacity; every token reaches its experts: dropless),
// and each token's output is the sum of its choices' outputs, each scaled by its weight. The
// experts' products themselves are the chunk's (train/transformer/moe_part.hpp), in its
// precision.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardwise::kernels {

// Where the choices go. Grouped row r is token token[r]'s choice choice[r] (t x k + j), and
// choice c's row is row[c] (-1 for a choice dropped over its expert's capacity); expert e's rows
// are [offsets[e], offsets[e + 1]).
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

// `chosen` (tokens x k) grouped by expert, leaving out the choices `dropped` marks (where given,
// tokens x k). InvalidArgument naming a choice outside [0, experts).
[[nodiscard]] ExpertGroups group_by_expert(const std::int32_t* chosen, std::size_t tokens,
                                           std::size_t k, std::size_t experts,
                                           const std::uint8_t* dropped = nullptr);

// A capacity per expert of each sequence's choices (Megatron-LM's and DeepSpeed's capacity
// factor, taken per sequence so that any split of the batch drops alike): of each `seq` tokens'
// choices, an expert takes the first `capacity` in token order (Megatron-LM's "position" policy)
// and the rest are marked in `dropped` (tokens x k). Returns how many were dropped.
std::size_t drop_over_capacity(std::uint8_t* dropped, const std::int32_t* chosen,
                               std::size_t tokens, std::size_t seq, std::size_t k,
                               std::size_t experts, std::size_t capacity);
// ceil(factor x seq x k / experts), at least 1: the choices an expert takes of one sequence.
[[nodiscard]] std::size_t expert_capacity(double factor, std::size_t seq, std::size_t k,
                                          std::size_t experts);

// rows (rows() x hidden): row r is token token[r]'s row of x (tokens x hidden).
void gather_rows(float* rows, const float* x, const ExpertGroups& groups, std::size_t hidden);

// out (tokens x hidden) = for each token the sum over its choices j, in order, of weights[t k + j]
// x its row of `outputs` (rows() x hidden); a dropped choice adds nothing.
void combine_rows(float* out, const float* outputs, const float* weights,
                  const ExpertGroups& groups, std::size_t tokens, std::size_t hidden,
                  std::size_t k);

// combine_rows' backward from dout (tokens x hidden): dweights (tokens x k) = each choice's row
// of `outputs` . its token's dout (0 for a dropped choice); then `outputs` is written over with
// its rows' gradients (weight x the token's dout).
void combine_backward(float* dweights, float* outputs, const float* dout, const float* weights,
                      const ExpertGroups& groups, std::size_t hidden);

// gather_rows' backward: dx (tokens x hidden) += for each token the sum of its choices' rows of
// drows (rows() x hidden), in its choices' order (none for a dropped choice).
void scatter_add_rows(float* dx, const float* drows, const ExpertGroups& groups, std::size_t tokens,
                      std::size_t hidden, std::size_t k);

}  // namespace shardwise::kernels
