#pragma once
// The main of a GoogleTest program run under mpirun: every rank runs the tests on the MPI world,
// and the job fails when any rank fails.

#include <gtest/gtest.h>
#include <mpi.h>

#include "shardwise/comm/mpi.hpp"

namespace shardwise::testing {

inline int run_mpi_tests(int argc, char** argv, Communicator*& world) {
  ::testing::InitGoogleTest(&argc, argv);
  MpiSession session(&argc, &argv);
  world = &session.world();
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any_failed;
}

}  // namespace shardwise::testing
