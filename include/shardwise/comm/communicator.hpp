#pragma once
// The Communicator: SPMD collectives and point-to-point messages over groups of ranks, with
// the buffer conventions of MPI and NCCL (a pointer, an element count and a dtype). Every call
// is collective over its group: each member makes the same call, in the same order.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/comm/byte_counters.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/placement.hpp"

namespace shardwise {

// Options every operation takes. A member that waits longer than `timeout` for the others
// fails with a CommError naming the operation, the group and the ranks that did not arrive.
struct CommOptions {
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

struct AllReduceOptions : CommOptions {};
struct AllGatherOptions : CommOptions {};
struct ReduceScatterOptions : CommOptions {};
struct AllToAllOptions : CommOptions {};
struct BroadcastOptions : CommOptions {};
struct BarrierOptions : CommOptions {};
struct PpermuteOptions : CommOptions {};
struct AllToAllvOptions : CommOptions {
  // Whether the call counts its bytes (ByteCounters, as "all_to_allv" along the group's axes).
  // Resharding turns it off and counts each piece along the axes its two ranks differ in.
  bool count_bytes = true;
};

// Where a member's blocks lie in a buffer for all_to_allv: one count and one offset per group
// member, both in elements.
struct BlockLayout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> offsets;
};

// One edge of a ppermute: member `source` of the group sends to member `destination`
// (positions in Group::ranks, as jax.lax.ppermute takes indices along its axis).
struct PermutePair {
  int source = 0;
  int destination = 0;
};
struct SendRecvOptions : CommOptions {
  int tag = 0;
  // The label the bytes are counted under (ByteCounters): resharding passes the mesh axes along
  // which the two ranks differ, e.g. "data+model".
  std::string axes = "p2p";
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&&) = delete;
  Communicator& operator=(Communicator&&) = delete;

  [[nodiscard]] virtual Rank rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  // "local" or "mpi".
  [[nodiscard]] virtual std::string backend() const = 0;

  // out = in_0 op in_1 op ... (count elements; in and out may be the same buffer). avg divides
  // the sum by the group size; bf16 and f16 are reduced in f32.
  virtual void all_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                          const Group& group, const AllReduceOptions& options = {}) = 0;
  // out (count x group size) = every member's `count` elements, in group order.
  virtual void all_gather(const void* in, void* out, std::size_t count, DType dtype,
                          const Group& group, const AllGatherOptions& options = {}) = 0;
  // in holds group-size blocks of `count`; member i's out is the reduction of every block i.
  virtual void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op, const Group& group,
                              const ReduceScatterOptions& options = {}) = 0;
  // in holds group-size blocks of `count`: block j goes to member j; out block i is from member i.
  // in == out runs in place (MPI_IN_PLACE): the own block stays, no staging copy is made; as
  // with MPI, every member runs in place or none does.
  virtual void all_to_all(const void* in, void* out, std::size_t count, DType dtype,
                          const Group& group, const AllToAllOptions& options = {}) = 0;
  // Every member's buffer becomes the root's (`root` is a rank of the group).
  // MPI_Alltoallv: `send.counts[j]` elements at `send.offsets[j]` of in go to member j, and
  // what member i sends lands at `receive.offsets[i]` of out (`receive.counts[i]` must equal
  // member i's `send.counts` for this member). in and out are different buffers.
  virtual void all_to_allv(const void* in, const BlockLayout& send, void* out,
                           const BlockLayout& receive, DType dtype, const Group& group,
                           const AllToAllvOptions& options = {}) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DType dtype, Rank root,
                         const Group& group, const BroadcastOptions& options = {}) = 0;
  virtual void barrier(const Group& group, const BarrierOptions& options = {}) = 0;
  // jax.lax.ppermute: for each pair, the source's `in` (count elements) becomes the
  // destination's `out`; a member that is no pair's destination gets zeros. Sources are
  // distinct, destinations are distinct, every member passes the same pairs, and in and out
  // are different buffers.
  virtual void ppermute(const void* in, void* out, std::size_t count, DType dtype,
                        const std::vector<PermutePair>& pairs, const Group& group,
                        const PpermuteOptions& options = {}) = 0;
  // Point to point, matched by (source, destination, tag) in order.
  virtual void send(const void* data, std::size_t count, DType dtype, Rank destination,
                    const SendRecvOptions& options = {}) = 0;
  virtual void recv(void* data, std::size_t count, DType dtype, Rank source,
                    const SendRecvOptions& options = {}) = 0;

  // Where the ranks share memory (the local backend): every member publishes `mine`, then
  // `work` runs on each member with every member's pointer in group order, and no member
  // returns before every member's work is done, so peers may read each other's buffers with
  // no staging copy. Returns false, doing nothing, where ranks do not share memory.
  virtual bool with_peer_buffers(
      const void* /*mine*/, const Group& /*group*/,
      const std::function<void(const std::vector<const void*>&)>& /*work*/,
      const CommOptions& /*options*/ = {}) {
    return false;
  }

  [[nodiscard]] ByteCounters& counters() { return counters_; }
  [[nodiscard]] const ByteCounters& counters() const { return counters_; }

 private:
  ByteCounters counters_;
};

}  // namespace shardwise
