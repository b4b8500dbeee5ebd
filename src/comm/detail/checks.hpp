#pragma once
// Argument checks every operation shares (the Communicator runs them before any backend).

#include <cstddef>
#include <vector>

#include "shardwise/comm/byte_counters.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/comm/group.hpp"

namespace shardwise::detail {

// This rank's member index in the group; throws InvalidArgument naming the operation when the
// group names a rank outside 0..world_size-1, names one twice, or leaves this rank out.
int member_index(const Group& group, Rank rank, int world_size, const char* op);

// Throws InvalidArgument naming the operation unless the options' timeout is positive.
void check_options(const CommOptions& options, const char* op);

// Throws InvalidArgument unless `peer` is another rank of 0..world_size-1.
void check_peer(Rank peer, Rank rank, int world_size, const char* op);

// Throws InvalidArgument unless every pair names members 0..group_size-1, no source or
// destination appears twice, and in and out differ (where count > 0).
void check_permutation(const std::vector<PermutePair>& pairs, int group_size, const void* in,
                       const void* out, std::size_t count);

// A member's part in a ppermute: the pair it receives by and the one it sends by (null where
// none), and whether each crosses to another member.
struct PermuteRole {
  const PermutePair* incoming = nullptr;
  const PermutePair* outgoing = nullptr;
  bool receives = false;
  bool sends = false;
};
PermuteRole permute_role(const std::vector<PermutePair>& pairs, int member);


// Throws InvalidArgument unless both layouts have one count and one offset per member and in
// and out differ (where anything moves).
void check_block_layouts(const BlockLayout& send, const BlockLayout& receive, int group_size,
                         const void* in, const void* out);


}  // namespace shardwise::detail
