#pragma once
// A Mixture-of-Experts router, as transformers' MixtralTopKRouter and Qwen3MoeTopKRouter compute
// it: each token's probabilities over the experts are the softmax of its logits (in float32);
// it goes to the k experts of largest probability, in torch.topk's order (largest first, ties as
// torch.topk on a CPU breaks them); each chosen expert's weight is its probability, divided by
// the chosen probabilities' sum where the router renormalises (Mixtral always, Qwen3-MoE where
// `norm_topk_prob`). And the Switch Transformer's auxiliary load-balancing loss as transformers'
// load_balancing_loss_func counts it.

#include <cstddef>
#include <cstdint>

namespace shardwise::kernels {

// For each of `tokens` rows of `logits` (tokens x experts): `probabilities` (tokens x experts)
// its softmax (probabilities may be logits: each row is computed in place), `chosen` (tokens x
// k) the experts, `weights` (tokens x k) their weights. Requires 1 <= k <= experts.
// `bias` (experts, or null): torchtitan's auxiliary-loss-free expert bias, added to each
// probability for the choice alone (the k largest probability + bias, in torch.topk's order);
// the weights stay the chosen probabilities.
void route_forward(std::int32_t* chosen, float* weights, float* probabilities, const float* logits,
                   std::size_t tokens, std::size_t experts, std::size_t k, bool renormalize,
                   const float* bias = nullptr);
// The choice alone, from the probabilities route_forward computed: the same experts and weights
// (what backward recomputes rather than keeps).
void choose_experts(std::int32_t* chosen, float* weights, const float* probabilities,
                    std::size_t tokens, std::size_t experts, std::size_t k, bool renormalize,
                    const float* bias = nullptr);

// dlogits (tokens x experts) = the logits' gradient from `dweights` (tokens x k, the chosen
// weights' gradient) and, where not null, `dprobability` (experts: a gradient of every row's
// probability of each expert, the auxiliary loss's). The choice itself has no gradient.
// dlogits may be probabilities (each row is read before it is written).
void route_backward(float* dlogits, const float* dweights, const float* dprobability,
                    const float* probabilities, const std::int32_t* chosen, std::size_t tokens,
                    std::size_t experts, std::size_t k, bool renormalize);

// torchtitan's update of a layer's auxiliary-loss-free expert bias from how many of the step's
// rows chose each expert (`counts`, experts, over every rank): each bias moves by rate x
// sign(mean count - count), the moves centred to sum to 0 (an expert chosen less than the mean
// gets likelier). Zero counts everywhere move nothing.
void update_expert_bias(float* bias, const double* counts, std::size_t experts, double rate);

// Adds one routing's statistics for the auxiliary loss: assignments[e] += how many of the rows'
// k choices (`chosen`, tokens x k) are expert e; probability_sums[e] += the rows' probabilities
// of it (tokens x experts).
void add_routing_statistics(double* assignments, double* probability_sums,
                            const float* probabilities, const std::int32_t* chosen,
                            std::size_t tokens, std::size_t experts, std::size_t k);

// The auxiliary loss of routings whose chosen experts were counted (`assignments[e]`: how many
// of the rows' k choices are expert e) and whose probabilities were summed
// (`probability_sums[e]`), over `rows` rows (every MoE layer's tokens, as transformers sums the
// layers before it multiplies): experts x sum_e (assignments_e / rows) (probability_sums_e /
// rows). 0 where rows is 0.
[[nodiscard]] double load_balancing_loss(const double* assignments, const double* probability_sums,
                                         std::size_t experts, double rows);

// The auxiliary loss's gradient with respect to each row's probability of expert e, the same for
// every row: `scale` x experts x assignments_e / rows^2 (scale: the loss's weight in the total,
// router_aux_loss_coef). Written to `dprobability` (experts).
void load_balancing_gradient(float* dprobability, const double* assignments, std::size_t experts,
                             double rows, double scale);

}  // namespace shardwise::kernels
