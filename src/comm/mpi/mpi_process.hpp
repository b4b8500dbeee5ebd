#pragma once
// What every MPI communicator of a process shares: MPI's types and reductions for shardwise's
// dtypes, and the channel on which any rank's abort reaches every other.

#include <mpi.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpi_types.hpp"

namespace shardwise::detail {

class MpiProcess {
 public:
  MpiProcess();
  ~MpiProcess();
  MpiProcess(const MpiProcess&) = delete;
  MpiProcess& operator=(const MpiProcess&) = delete;
  MpiProcess(MpiProcess&&) = delete;
  MpiProcess& operator=(MpiProcess&&) = delete;

  [[nodiscard]] const MpiTypes& types() const { return types_; }
  [[nodiscard]] int world_rank() const { return world_rank_; }

  // Tells every other rank of the world (without waiting) and marks this one aborted.
  void abort(const std::string& reason);
  // The abort of any rank, once one has reached this one ("rank 3 aborted: reason").
  [[nodiscard]] const std::optional<std::string>& aborted();

 private:
  MpiTypes types_;
  MPI_Comm channel_ = MPI_COMM_NULL;
  int world_rank_ = 0;
  int world_size_ = 1;
  std::optional<std::string> aborted_;
  std::vector<std::unique_ptr<std::string>> messages_;
  std::vector<MPI_Request> sends_;
};

}  // namespace shardwise::detail
