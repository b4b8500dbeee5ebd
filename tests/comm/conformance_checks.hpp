#pragma once
// The communicator conformance suite, written once for every backend: each check runs on every
// rank of a world (local threads or MPI processes) and asserts closed-form results.

#include "shardwise/comm/communicator.hpp"

namespace shardwise::testing {

// Every check below, over every dtype and the sizes 0, 1, 7, 1000 and 65539 elements.
void run_all_checks(Communicator& comm);

void check_all_reduce(Communicator& comm, DType dtype, std::size_t count, ReduceOp op);
void check_all_reduce_in_place(Communicator& comm, DType dtype, std::size_t count);
void check_all_gather(Communicator& comm, DType dtype, std::size_t count);
void check_reduce_scatter(Communicator& comm, DType dtype, std::size_t count);
// in_place passes the same buffer as input and output.
void check_all_to_all(Communicator& comm, DType dtype, std::size_t count, bool in_place);
// Uneven blocks (scale x ((i + 2j) % 3) elements from member i to j), received out of order.
void check_all_to_allv(Communicator& comm, DType dtype, std::size_t scale);
void check_broadcast(Communicator& comm, DType dtype, std::size_t count);
// A ring shift, then a single edge (the members it misses get zeros).
void check_ppermute(Communicator& comm, DType dtype, std::size_t count);
void check_send_recv_ring(Communicator& comm, DType dtype, std::size_t count);
// Collectives over the groups of a (2, n/2) mesh (even world sizes): along each axis.
void check_mesh_axis_groups(Communicator& comm);
// Barriers (and one nonblocking barrier) move no bytes.
void check_barrier(Communicator& comm);
// An all-reduce in flight while the caller computes; several operations in flight at once,
// waited for in another order, with a blocking call among them.
void check_nonblocking(Communicator& comm);
// All-reduce and reduce-scatter of several buffers (one empty) in one call.
void check_coalesced(Communicator& comm);
// A ring in one batch; sends and receives that are not in lockstep.
void check_batched_point_to_point(Communicator& comm);
// new_group of two ranks; split along each axis of a (2, n/2) mesh (even sizes).
void check_sub_communicators(Communicator& comm);
// The logical bytes of each collective at a count (7) the members do not divide.
void check_byte_accounting(Communicator& comm);

}  // namespace shardwise::testing
