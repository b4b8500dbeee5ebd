#pragma once
// Where a Mixture-of-Experts layer's routed rows travel over the expert axis (ExpertParallel):
// this rank's rows, grouped by expert (kernels::ExpertGroups over every expert), go to the ranks
// holding their experts; each rank's experts get their rows from every rank, and compute on them
// grouped by expert (expert-major: local expert l's rows from member 0, then from member 1, ...),
// so that each expert runs one product per matrix. The outputs go back the same way. Built from
// one exchange of counts; the rows' exchanges then move exactly the routed rows, nothing padded.
// On one rank nothing moves and the expert-major rows are the grouped rows.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shardwise/kernels/moe_experts.hpp"
#include "shardwise/train/expert_parallel.hpp"

namespace shardwise::train::transformer {

class ExpertDispatch {
 public:
  ExpertDispatch() = default;
  // Collective over the expert axis: every member's counts for this rank's experts. `groups`
  // holds this rank's rows grouped over all `experts`, which the degree divides. InvalidArgument
  // where a member's counts are negative or more than `most_from_each` rows in all (every member
  // routes as many rows as this one).
  ExpertDispatch(const ExpertParallel& axis, const kernels::ExpertGroups& groups,
                 std::size_t experts, std::size_t most_from_each);

  // How many experts each rank holds (rank r experts [r local, (r + 1) local)).
  [[nodiscard]] std::size_t local_experts() const { return local_; }
  // Rows this rank's experts compute on, and local expert l's block of them (expert-major).
  [[nodiscard]] std::size_t received_rows() const { return offsets_.empty() ? 0 : offsets_.back(); }
  [[nodiscard]] std::size_t expert_offset(std::size_t l) const { return offsets_[l]; }
  [[nodiscard]] std::size_t expert_rows(std::size_t l) const {
    return offsets_[l + 1] - offsets_[l];
  }

  // expert_rows (received_rows() x width, expert-major) from each rank's `sent` (its grouped
  // rows x width). `staging` holds the rows as they arrive.
  void to_experts(const ExpertParallel& axis, const float* sent, float* expert_rows,
                  std::size_t width, std::vector<float>& staging) const;
  // The reverse: `returned` (this rank's grouped rows x width) from every expert's rows.
  void from_experts(const ExpertParallel& axis, const float* expert_rows, float* returned,
                    std::size_t width, std::vector<float>& staging) const;

 private:
  // Copies between member-major (as exchanged) and expert-major rows.
  void reorder(const float* from, float* to, std::size_t width, bool to_expert_major) const;

  std::size_t local_ = 0;
  std::vector<std::size_t> sent_rows_, received_rows_;  // per member
  std::vector<std::int64_t> counts_;                    // [member][local expert] received
  std::vector<std::size_t> offsets_;                    // local_ + 1, expert-major
};

}  // namespace shardwise::train::transformer
