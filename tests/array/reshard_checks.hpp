#pragma once
// Resharding checks written once for every backend: each runs on every rank of an 8-rank world
// (local threads or MPI processes) and asserts with GoogleTest.

#include "shardwise/comm/communicator.hpp"

namespace shardwise::testing {

void check_each_pattern_uses_its_collective_along_the_axes_that_change(Communicator& comm);
void check_plans_are_compiled_once_and_reused(Communicator& comm);
void check_an_array_on_a_sub_mesh_involves_only_its_ranks(Communicator& comm);
void check_partial_sources_reduce_into_the_target(Communicator& comm);

}  // namespace shardwise::testing
