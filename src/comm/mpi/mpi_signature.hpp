#pragma once
// What every member of an MPI collective exchanges before any data moves: the operation, count,
// dtype, reduction, root, in-place flag and a digest of the rest (ppermute pairs, coalesced
// buffer sizes, a split's mesh). An all_to_allv's count and digest are sums of hashes of the
// blocks a member sends and of those it expects, equal over the group where they agree. Members
// that disagree all fail with the same message, naming the first member that differs from the
// group's first, instead of hanging or mixing data.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../detail/op_request.hpp"

namespace shardwise::detail {

struct MpiSignature {
  std::uint8_t op = 0;
  std::uint8_t dtype = 0;
  std::uint8_t reduce = 0;
  std::uint8_t in_place = 0;
  // The member waits on the call at once. MPI's blocking and nonblocking collectives do not
  // match each other, so the blocking one runs only where every member asks for it.
  std::uint8_t blocking = 0;
  std::uint8_t unused[3] = {0, 0, 0};
  std::int32_t root = -1;
  std::uint64_t count = 0;
  std::uint64_t digest = 0;
};
static_assert(sizeof(MpiSignature) == 28 || sizeof(MpiSignature) == 32);

// The signature of a request, as member `member` of its group makes it.
MpiSignature signature_of(const OpRequest& request, int member);
// A split's: `agreement` names the mesh and axes (or ranks).
MpiSignature split_signature(const std::string& agreement);

// "all_reduce of 8 f64 (sum)".
std::string describe(const MpiSignature& signature);

// The mismatch among the group's signatures (all but in_place, which members may differ in
// where MPI allows), as an error message; nullopt when they agree.
std::optional<std::string> mismatch(const std::vector<MpiSignature>& signatures, const Group& group,
                                    const std::string& operation);

}  // namespace shardwise::detail
