#pragma once
// What every MPI communicator of a process shares: MPI's types and reductions for shardwise's
// dtypes, and the channel on which any rank's abort reaches every other.

#include <mpi.h>

#include <chrono>
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

  // Tells every other rank of the world (without waiting; once per process) and marks this one
  // aborted.
  void abort(const std::string& reason);
  // The abort of any rank, once one has reached this one ("rank 3 aborted: reason").
  [[nodiscard]] const std::optional<std::string>& aborted();
  // Whether another rank's abort has reached this one (in aborted(), or in progress of an
  // operation, which calls it).
  [[nodiscard]] bool aborted_by_peer() const { return aborted_by_peer_; }

  // Every process reports (status, whether the failure was its own); returns every report in
  // rank order, or nullopt when not all arrive by `deadline`. Runs on a communicator of its own,
  // so that operations left unfinished by a failure cannot hold it up.
  [[nodiscard]] std::optional<std::vector<int>> exchange_outcomes(
      int status, bool own_failure, std::chrono::steady_clock::time_point deadline);

 private:
  MpiTypes types_;
  MPI_Comm channel_ = MPI_COMM_NULL;
  MPI_Comm outcomes_ = MPI_COMM_NULL;
  int world_rank_ = 0;
  int world_size_ = 1;
  std::optional<std::string> aborted_;
  bool aborted_by_peer_ = false;
  bool told_peers_ = false;
  std::vector<std::unique_ptr<std::string>> messages_;
  std::vector<MPI_Request> sends_;
};

}  // namespace shardwise::detail
