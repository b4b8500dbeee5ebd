#include "detail/checks.hpp"

#include <chrono>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {

int member_index(const Group& group, Rank rank, int world_size, const char* op) {
  // Ranks are distinct and non-negative by construction (Group checks them once).
  if (group.max_rank() >= world_size) {
    throw InvalidArgument(std::string(op) + ": group " + group.to_string() + " names rank " +
                          std::to_string(group.max_rank()) + " outside 0.." +
                          std::to_string(world_size - 1));
  }
  const int member = group.index_of(rank);
  if (member < 0) {
    throw InvalidArgument(std::string(op) + ": rank " + std::to_string(rank) + " is not in group " +
                          group.to_string());
  }
  return member;
}

void check_options(const CommOptions& options, const char* op) {
  // At most a year: every backend adds it to the clock's now, which must not overflow.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  if (options.timeout.count() <= 0 || options.timeout > kLongest) {
    throw InvalidArgument(std::string(op) + ": timeout is " +
                          std::to_string(options.timeout.count()) +
                          " ms; expected a positive duration of at most " +
                          std::to_string(kLongest.count()) + " ms (a year)");
  }
}

void check_peer(Rank peer, Rank rank, int world_size, const char* op) {
  if (peer < 0 || peer >= world_size || peer == rank) {
    throw InvalidArgument(std::string(op) + " by rank " + std::to_string(rank) + ": peer " +
                          std::to_string(peer) + " is not another rank of 0.." +
                          std::to_string(world_size - 1));
  }
}

void check_permutation(const std::vector<PermutePair>& pairs, int group_size, const void* in,
                       const void* out, std::size_t count) {
  std::vector<bool> is_source(static_cast<std::size_t>(group_size), false);
  std::vector<bool> is_destination(static_cast<std::size_t>(group_size), false);
  auto claim = [&](std::vector<bool>& used, int member, const char* role) {
    if (member < 0 || member >= group_size) {
      throw InvalidArgument("ppermute: " + std::string(role) + " " + std::to_string(member) +
                            " is not a member index of a group of " + std::to_string(group_size));
    }
    if (used[static_cast<std::size_t>(member)]) {
      throw InvalidArgument("ppermute: member " + std::to_string(member) + " is the " + role +
                            " of two pairs");
    }
    used[static_cast<std::size_t>(member)] = true;
  };
  for (const PermutePair& pair : pairs) {
    claim(is_source, pair.source, "source");
    claim(is_destination, pair.destination, "destination");
  }
  if (count > 0 && in == out) {
    throw InvalidArgument("ppermute: in and out must be different buffers");
  }
}

PermuteRole permute_role(const std::vector<PermutePair>& pairs, int member) {
  PermuteRole role;
  for (const PermutePair& pair : pairs) {
    if (pair.destination == member) role.incoming = &pair;
    if (pair.source == member) role.outgoing = &pair;
  }
  role.receives = role.incoming != nullptr && role.incoming->source != member;
  role.sends = role.outgoing != nullptr && role.outgoing->destination != member;
  return role;
}

void check_block_layouts(const BlockLayout& send, const BlockLayout& receive, int group_size,
                         const void* in, const void* out) {
  const auto n = static_cast<std::size_t>(group_size);
  auto check_size = [n](const std::vector<std::size_t>& values, const char* field) {
    if (values.size() != n) {
      throw InvalidArgument("all_to_allv: " + std::string(field) + " has " +
                            std::to_string(values.size()) + " entries for a group of " +
                            std::to_string(n));
    }
  };
  check_size(send.counts, "send.counts");
  check_size(send.offsets, "send.offsets");
  check_size(receive.counts, "receive.counts");
  check_size(receive.offsets, "receive.offsets");
  std::size_t moved = 0;
  for (std::size_t count : send.counts) moved += count;
  for (std::size_t count : receive.counts) moved += count;
  if (moved > 0 && in == out) {
    throw InvalidArgument("all_to_allv: in and out must be different buffers");
  }
}

}  // namespace shardwise::detail
