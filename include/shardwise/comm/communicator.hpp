#pragma once
// The Communicator: SPMD collectives and point-to-point messages over groups of ranks, with
// the buffer conventions of MPI and NCCL (a pointer, an element count and a dtype). Every call
// is collective over its group: each member makes the same call, in the same order.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/comm/byte_counters.hpp"
#include "shardwise/comm/group.hpp"
#include "shardwise/comm/work.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/placement.hpp"

namespace shardwise {

// Options every operation takes. A member that waits longer than `timeout` for the others
// fails with a CommError naming the operation, the group and the ranks that did not arrive;
// a timeout of zero or less is bad input.
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
  // The label each member's bytes are counted under, one per member (resharding passes the
  // mesh axes along which this rank and that member differ); empty: the group's axes.
  std::vector<std::string> member_axes;
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

// One buffer of a coalesced all-reduce or reduce-scatter (gradient buckets): `count` elements
// as the single-buffer call takes them.
struct CoalescedBuffer {
  const void* in = nullptr;
  void* out = nullptr;
  std::size_t count = 0;
};

// One message of a batch of point-to-point operations (pipeline stages send and receive at
// different times, without lockstep).
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  // Read for a send (copied when the batch starts), written for a receive.
  void* buffer = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kF32;
  Rank peer = 0;
  int tag = 0;
};

namespace detail {
class CommBackend;
struct CallScratch;
}  // namespace detail

// A communicator: the ranks of a world (or of a group split from one) and the operations
// between them. Public methods are not virtual: each validates its arguments, starts the
// operation on the backend, and counts its bytes when it succeeds, the same for every backend.
// Every operation is collective over its group (point-to-point over its two ranks), and the
// members of a group issue their operations on it in the same order. Blocking forms return when
// the operation has finished; `i...` forms return a Work at once.
class Communicator {
 public:
  explicit Communicator(std::unique_ptr<detail::CommBackend> backend);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&&) = delete;
  Communicator& operator=(Communicator&&) = delete;

  // This member's rank, 0..size()-1, in this communicator.
  [[nodiscard]] Rank rank() const;
  [[nodiscard]] int size() const;
  // "local" or "mpi".
  [[nodiscard]] std::string backend() const;
  // The largest point-to-point tag the backend takes (MPI_TAG_UB under MPI, which the standard
  // guarantees only to be at least 32767; INT_MAX in process).
  [[nodiscard]] int max_tag() const;
  // The world ranks of this communicator's members, in its rank order (0..n-1 for a world).
  [[nodiscard]] const std::vector<Rank>& world_ranks() const;

  // out = in_0 op in_1 op ... (count elements; in and out may be the same buffer). avg divides
  // the sum by the group size; bf16 and f16 are reduced in f32.
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                  const Group& group, const AllReduceOptions& options = {});
  [[nodiscard]] Work iall_reduce(const void* in, void* out, std::size_t count, DType dtype,
                                 ReduceOp op, const Group& group,
                                 const AllReduceOptions& options = {});
  // Several buffers in one operation (a bucket of gradients): each as all_reduce does it.
  void all_reduce_coalesced(const std::vector<CoalescedBuffer>& buffers, DType dtype, ReduceOp op,
                            const Group& group, const AllReduceOptions& options = {});
  [[nodiscard]] Work iall_reduce_coalesced(const std::vector<CoalescedBuffer>& buffers, DType dtype,
                                           ReduceOp op, const Group& group,
                                           const AllReduceOptions& options = {});

  // out (count x group size) = every member's `count` elements, in group order.
  void all_gather(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllGatherOptions& options = {});
  [[nodiscard]] Work iall_gather(const void* in, void* out, std::size_t count, DType dtype,
                                 const Group& group, const AllGatherOptions& options = {});

  // in holds group-size blocks of `count`; member i's out is the reduction of every block i.
  void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                      const Group& group, const ReduceScatterOptions& options = {});
  [[nodiscard]] Work ireduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                                     ReduceOp op, const Group& group,
                                     const ReduceScatterOptions& options = {});
  void reduce_scatter_coalesced(const std::vector<CoalescedBuffer>& buffers, DType dtype,
                                ReduceOp op, const Group& group,
                                const ReduceScatterOptions& options = {});
  [[nodiscard]] Work ireduce_scatter_coalesced(const std::vector<CoalescedBuffer>& buffers,
                                               DType dtype, ReduceOp op, const Group& group,
                                               const ReduceScatterOptions& options = {});

  // in holds group-size blocks of `count`: block j goes to member j; out block i is from member
  // i. in == out runs in place (MPI_IN_PLACE): the own block stays, no staging copy is made; as
  // with MPI, every member runs in place or none does.
  void all_to_all(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllToAllOptions& options = {});
  [[nodiscard]] Work iall_to_all(const void* in, void* out, std::size_t count, DType dtype,
                                 const Group& group, const AllToAllOptions& options = {});

  // MPI_Alltoallv: `send.counts[j]` elements at `send.offsets[j]` of in go to member j, and
  // what member i sends lands at `receive.offsets[i]` of out (`receive.counts[i]` must equal
  // member i's `send.counts` for this member). in and out are different buffers.
  void all_to_allv(const void* in, const BlockLayout& send, void* out, const BlockLayout& receive,
                   DType dtype, const Group& group, const AllToAllvOptions& options = {});
  [[nodiscard]] Work iall_to_allv(const void* in, const BlockLayout& send, void* out,
                                  const BlockLayout& receive, DType dtype, const Group& group,
                                  const AllToAllvOptions& options = {});

  // Every member's buffer becomes the root's (`root` is a rank of the group).
  void broadcast(void* buffer, std::size_t count, DType dtype, Rank root, const Group& group,
                 const BroadcastOptions& options = {});
  [[nodiscard]] Work ibroadcast(void* buffer, std::size_t count, DType dtype, Rank root,
                                const Group& group, const BroadcastOptions& options = {});

  void barrier(const Group& group, const BarrierOptions& options = {});
  [[nodiscard]] Work ibarrier(const Group& group, const BarrierOptions& options = {});

  // jax.lax.ppermute: for each pair, the source's `in` (count elements) becomes the
  // destination's `out`; a member that is no pair's destination gets zeros. Sources are
  // distinct, destinations are distinct, every member passes the same pairs, and in and out
  // are different buffers.
  void ppermute(const void* in, void* out, std::size_t count, DType dtype,
                const std::vector<PermutePair>& pairs, const Group& group,
                const PpermuteOptions& options = {});
  [[nodiscard]] Work ippermute(const void* in, void* out, std::size_t count, DType dtype,
                               const std::vector<PermutePair>& pairs, const Group& group,
                               const PpermuteOptions& options = {});

  // Point to point, matched by (source, destination, tag) in order. A send's data is copied
  // when it starts, so its buffer may be reused at once.
  void send(const void* data, std::size_t count, DType dtype, Rank destination,
            const SendRecvOptions& options = {});
  void recv(void* data, std::size_t count, DType dtype, Rank source,
            const SendRecvOptions& options = {});
  [[nodiscard]] Work isend(const void* data, std::size_t count, DType dtype, Rank destination,
                           const SendRecvOptions& options = {});
  [[nodiscard]] Work irecv(void* data, std::size_t count, DType dtype, Rank source,
                           const SendRecvOptions& options = {});
  // Sends and receives started together (torch.distributed.batch_isend_irecv); the Work
  // finishes when all have. Ranks need not call it in lockstep with their peers.
  [[nodiscard]] Work batch_isend_irecv(const std::vector<P2POp>& ops,
                                       const SendRecvOptions& options = {});

  // A communicator of this rank's group along `axes` of `mesh` (whose device ids are this
  // communicator's ranks): one of mesh.groups(axes), with ranks in group order. Collective over
  // this communicator: every member calls it, in the same order among its operations.
  [[nodiscard]] std::unique_ptr<Communicator> split(const Mesh& mesh,
                                                    const std::vector<std::string>& axes,
                                                    const CommOptions& options = {});
  // A communicator of `ranks` (in that order), as c10d's new_group: every member of this
  // communicator calls it with the same ranks; those not among them get nullptr.
  [[nodiscard]] std::unique_ptr<Communicator> new_group(const std::vector<Rank>& ranks,
                                                        const CommOptions& options = {});

  // Ends this communicator's world: every operation waiting on any rank of it (this one's
  // included) fails with a CommError carrying `reason`, and later ones fail at once.
  void abort(const std::string& reason);

  // Where the ranks share memory (the local backend): every member publishes `mine`, then
  // `work` runs on each member with every member's pointer in group order, and no member
  // returns before every member's work is done, so peers may read each other's buffers with
  // no staging copy. Returns false, doing nothing, where ranks do not share memory.
  bool with_peer_buffers(const void* mine, const Group& group,
                         const std::function<void(const std::vector<const void*>&)>& work,
                         const CommOptions& options = {});

  // with_peer_buffers for a collective whose data each member copies itself out of its
  // peers' buffers (a reshard into a strided target): on success the bytes are counted as
  // `op` of `count` elements of `dtype` per member counts them, by the same rule.
  bool with_peer_buffers_as(CommOp op, std::size_t count, DType dtype, const void* mine,
                            const Group& group,
                            const std::function<void(const std::vector<const void*>&)>& work,
                            const CommOptions& options = {});

  [[nodiscard]] ByteCounters& counters() { return counters_; }
  [[nodiscard]] const ByteCounters& counters() const { return counters_; }

  // The backend behind this communicator (for backends and tests).
  [[nodiscard]] detail::CommBackend& backend_impl() { return *backend_; }

 private:
  std::unique_ptr<detail::CommBackend> backend_;
  ByteCounters counters_;
  // Reused by blocking calls: their request and byte records.
  std::unique_ptr<detail::CallScratch> scratch_;
  // Set while a blocking form starts its operation (the backend may run it inline then).
  bool blocking_ = false;
};

}  // namespace shardwise
