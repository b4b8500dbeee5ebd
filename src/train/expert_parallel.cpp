#include "shardwise/train/expert_parallel.hpp"

#include <algorithm>

#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/element_type.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/parallelism_config.hpp"

namespace shardwise::train {
namespace {

BlockLayout rows_layout(const std::vector<std::size_t>& rows, std::size_t width) {
  BlockLayout layout;
  std::size_t at = 0;
  for (const std::size_t count : rows) {
    const auto elements = static_cast<std::size_t>(checked_multiply(
        static_cast<std::int64_t>(count), static_cast<std::int64_t>(width), "expert rows"));
    layout.counts.push_back(elements);
    layout.offsets.push_back(at);
    at += elements;
  }
  return layout;
}

}  // namespace

ExpertParallel::ExpertParallel(const ParallelContext& context)
    : comm_(&context.experts_communicator()),
      group_(context.experts_group()),
      degree_(context.experts_degree()),
      rank_(context.experts_index()),
      axis_degree_(context.degree(kExpertAxis)) {}

ExpertParallel::ExpertParallel(const TensorParallel& model_axis)
    : comm_(model_axis.communicator()),
      group_(model_axis.group()),
      degree_(model_axis.degree()),
      rank_(model_axis.rank()) {}

void ExpertParallel::exchange_counts(const std::int64_t* sent, std::int64_t* received,
                                     std::size_t per_member) const {
  if (degree_ == 1) {
    std::copy_n(sent, per_member, received);
    return;
  }
  comm_->all_to_all(sent, received, per_member, element_type(sent), group_);
}

void ExpertParallel::exchange_rows(const float* sent, const std::vector<std::size_t>& sent_rows,
                                   float* received, const std::vector<std::size_t>& received_rows,
                                   std::size_t width) const {
  const auto members = static_cast<std::size_t>(degree_);
  if (sent_rows.size() != members || received_rows.size() != members) {
    throw InvalidArgument("an exchange of expert rows over " + std::to_string(degree_) +
                          " ranks given " + std::to_string(sent_rows.size()) + " and " +
                          std::to_string(received_rows.size()) + " counts");
  }
  if (degree_ == 1) {
    if (sent_rows[0] != received_rows[0]) {
      throw InvalidArgument("an exchange of expert rows on one rank sends " +
                            std::to_string(sent_rows[0]) + " rows and receives " +
                            std::to_string(received_rows[0]));
    }
    if (sent != received) std::copy_n(sent, sent_rows[0] * width, received);
    return;
  }
  comm_->all_to_allv(sent, rows_layout(sent_rows, width), received,
                     rows_layout(received_rows, width), element_type(sent), group_);
}

}  // namespace shardwise::train
