#pragma once
// Expert parallelism's traffic over the expert axis of a ParallelContext (GShard's dispatch and
// combine; torchtitan's and Megatron-core's all-to-all dispatcher): each rank holds E / degree
// consecutive experts of every Mixture-of-Experts layer (rank r experts [r E / degree, ...)).
// Where the mesh has a model axis the experts are folded over it too (Megatron-LM's "parallel
// folding" with expert tensor parallelism 1: each expert whole on one rank): the members are the
// model x expert ranks, model major (ParallelContext::experts_group). A
// layer's routed rows, grouped by expert, go to the ranks holding their experts in two steps: an
// all-to-all of how many rows each expert gets from each rank, then an all-to-all of the rows
// with those variable counts; the experts' outputs come back the same way, and backward mirrors
// both. Degree 1 (no expert axis) moves nothing.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardwise/comm/communicator.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise::train {

class ExpertParallel {
 public:
  // Degree 1.
  ExpertParallel() = default;
  // Over `context`'s expert and model axes.
  explicit ExpertParallel(const ParallelContext& context);
  // Over a model axis alone (decoding, whose mesh has no other).
  explicit ExpertParallel(const TensorParallel& model_axis);

  // The ranks the experts are split over (model x expert), and this rank's member index.
  [[nodiscard]] int degree() const { return degree_; }
  [[nodiscard]] int rank() const { return rank_; }
  // The expert axis' size alone (the placements' expert degree).
  [[nodiscard]] int axis_degree() const { return axis_degree_; }

  // received (degree x `per_member`) = every member's block for this rank, in member order, from
  // sent (degree x per_member: block j for member j). Degree 1 copies.
  void exchange_counts(const std::int64_t* sent, std::int64_t* received,
                       std::size_t per_member) const;
  // Rows of `width` floats: `sent_rows[j]` consecutive rows of `sent` go to member j, in member
  // order, and member i's come to `received` in member order (`received_rows[i]` of them, as
  // exchange_counts told). Degree 1 copies.
  void exchange_rows(const float* sent, const std::vector<std::size_t>& sent_rows, float* received,
                     const std::vector<std::size_t>& received_rows, std::size_t width) const;

 private:
  Communicator* comm_ = nullptr;
  Group group_;
  int degree_ = 1;
  int rank_ = 0;
  int axis_degree_ = 1;
};

}  // namespace shardwise::train
