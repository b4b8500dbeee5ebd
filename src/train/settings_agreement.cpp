#include "shardwise/train/settings_agreement.hpp"

#include <cstdint>

#include "detail/crc32c.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {

void check_ranks_agree(Communicator& comm, const std::vector<Setting>& settings) {
  std::vector<std::uint32_t> mine;
  mine.reserve(settings.size());
  for (const auto& [name, value] : settings) {
    // The name too: ranks that list other settings disagree. (Sent as i32: only equality counts.)
    mine.push_back(
        shardwise::detail::crc32c(value.data(), value.size(), shardwise::detail::crc32c(name)));
  }
  std::vector<std::uint32_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.all_gather(mine.data(), all.data(), mine.size(), DType::kI32, world_group(comm.size()));
  for (int r = 1; r < comm.size(); ++r) {
    for (std::size_t f = 0; f < mine.size(); ++f) {
      if (all[static_cast<std::size_t>(r) * mine.size() + f] != all[f]) {
        throw InvalidArgument("rank " + std::to_string(r) + " runs with another " +
                              settings[f].first +
                              " than rank 0; every rank of a run needs the same flags and data");
      }
    }
  }
}

}  // namespace shardwise::train
