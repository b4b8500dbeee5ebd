#include "expert_dispatch.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::train::transformer {

ExpertDispatch::ExpertDispatch(const ExpertParallel& axis, const kernels::ExpertGroups& groups,
                               std::size_t experts, std::size_t most_from_each) {
  const auto members = static_cast<std::size_t>(axis.degree());
  if (experts % members != 0 || groups.offsets.size() != experts + 1) {
    throw InvalidArgument("a dispatch of " + std::to_string(experts) + " experts over " +
                          std::to_string(members) + " ranks (model x expert)");
  }
  local_ = experts / members;
  const std::size_t first = static_cast<std::size_t>(axis.rank()) * local_;
  // What each member's experts get from this rank, then what this rank's get from each.
  std::vector<std::int64_t> sent(experts);
  sent_rows_.assign(members, 0);
  for (std::size_t e = 0; e < experts; ++e) {
    sent[e] = static_cast<std::int64_t>(groups.count(e));
    sent_rows_[e / local_] += groups.count(e);
  }
  counts_.assign(experts, 0);
  axis.exchange_counts(sent.data(), counts_.data(), local_);
  received_rows_.assign(members, 0);
  offsets_.assign(local_ + 1, 0);
  for (std::size_t m = 0; m < members; ++m) {
    for (std::size_t l = 0; l < local_; ++l) {
      const std::int64_t count = counts_[m * local_ + l];
      if (count < 0 || received_rows_[m] + static_cast<std::size_t>(count) > most_from_each) {
        throw InvalidArgument("member " + std::to_string(m) + " of the experts' ranks sends " +
                              std::to_string(count) + " rows to expert " +
                              std::to_string(first + l) + ", more than the " +
                              std::to_string(most_from_each) + " rows each rank routes");
      }
      received_rows_[m] += static_cast<std::size_t>(count);
      offsets_[l + 1] += static_cast<std::size_t>(count);
    }
  }
  for (std::size_t l = 0; l < local_; ++l) offsets_[l + 1] += offsets_[l];
}

void ExpertDispatch::reorder(const float* from, float* to, std::size_t width,
                             bool to_expert_major) const {
  // Member m's rows for local expert l lie at `member_at` member-major and at `next[l]`
  // expert-major.
  std::vector<std::size_t> next(local_);
  for (std::size_t l = 0; l < local_; ++l) next[l] = offsets_[l];
  std::size_t member_at = 0;
  for (std::size_t m = 0; m < received_rows_.size(); ++m) {
    for (std::size_t l = 0; l < local_; ++l) {
      const auto rows = static_cast<std::size_t>(counts_[m * local_ + l]);
      const float* source = (to_expert_major ? from + member_at * width : from + next[l] * width);
      float* target = (to_expert_major ? to + next[l] * width : to + member_at * width);
      std::copy_n(source, rows * width, target);
      member_at += rows;
      next[l] += rows;
    }
  }
}

void ExpertDispatch::to_experts(const ExpertParallel& axis, const float* sent, float* expert_rows,
                                std::size_t width, std::vector<float>& staging) const {
  if (axis.degree() == 1) {
    if (sent != expert_rows) std::copy_n(sent, received_rows() * width, expert_rows);
    return;
  }
  staging.resize(std::max<std::size_t>(received_rows() * width, 1));
  axis.exchange_rows(sent, sent_rows_, staging.data(), received_rows_, width);
  reorder(staging.data(), expert_rows, width, true);
}

void ExpertDispatch::from_experts(const ExpertParallel& axis, const float* expert_rows,
                                  float* returned, std::size_t width,
                                  std::vector<float>& staging) const {
  if (axis.degree() == 1) {
    if (expert_rows != returned) std::copy_n(expert_rows, received_rows() * width, returned);
    return;
  }
  staging.resize(std::max<std::size_t>(received_rows() * width, 1));
  reorder(expert_rows, staging.data(), width, false);
  axis.exchange_rows(staging.data(), received_rows_, returned, sent_rows_, width);
}

}  // namespace shardwise::train::transformer
