#pragma once
// The MPI backend: one rank per process. A group becomes a pair of MPI communicators of its
// members (created on first use, after a meeting that can time out): one carries the members'
// signatures, exchanged before any data moves, the other the data, through MPI's own
// collectives. Operations progress, in the order they started, inside MPI calls: every Work's
// test() and wait(), and every later operation of the same communicator.

#include <mpi.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../detail/comm_backend.hpp"
#include "mpi_process.hpp"

namespace shardwise::detail {

class MpiWorkState;

class MpiBackend final : public CommBackend {
 public:
  // Takes `comm` (a communicator this backend owns and frees).
  MpiBackend(std::shared_ptr<MpiProcess> process, MPI_Comm comm);
  ~MpiBackend() override;
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;
  MpiBackend(MpiBackend&&) = delete;
  MpiBackend& operator=(MpiBackend&&) = delete;

  [[nodiscard]] Rank rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] std::string name() const override { return "mpi"; }
  [[nodiscard]] int max_tag() const override;
  [[nodiscard]] const std::vector<Rank>& world_ranks() const override { return world_ranks_; }

  Work start(OpRequest request) override;
  std::unique_ptr<CommBackend> split(const std::optional<std::vector<Rank>>& members,
                                     const std::string& agreement,
                                     const CommOptions& options) override;
  void abort(const std::string& reason) override;

  // Advances every operation in flight, in order; called from Work::test and wait.
  void progress();

  // Staging buffers kept between operations: fresh pages for every large operation cost more
  // than the operation (page faults on both sides of MPI's single-copy transfers).
  std::vector<std::byte> take_buffer(std::size_t bytes);
  void give_buffer(std::vector<std::byte> buffer);

  struct GroupComms {
    MPI_Comm signatures = MPI_COMM_NULL;
    MPI_Comm data = MPI_COMM_NULL;
  };

 private:
  friend class MpiWorkState;

  // The communicators of a group, created the first time it is used.
  GroupComms& comms_for(const Group& group, const CommOptions& options, const std::string& op);
  // Members send each other a token naming the group and wait for theirs, with a timeout.
  void meet(const Group& group, const CommOptions& options, const std::string& op);
  // Throws CommError for an MPI error code.
  void check(int code, const std::string& what) const;
  void drain();

  std::shared_ptr<MpiProcess> process_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm meeting_ = MPI_COMM_NULL;
  MPI_Comm p2p_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<Rank> world_ranks_;
  std::map<std::vector<Rank>, GroupComms> comms_;
  std::deque<std::shared_ptr<MpiWorkState>> pending_;
  std::vector<std::vector<std::byte>> spare_buffers_;
  // Sends on their way, with the copies they send from.
  std::vector<std::pair<std::shared_ptr<std::vector<std::byte>>, MPI_Request>> background_sends_;
  // Set when an operation timed out with requests MPI cannot cancel: the communicator then
  // refuses every later operation instead of matching it against the stale ones.
  std::optional<std::string> broken_;
  // Staging buffers of collectives that timed out in flight: MPI may still write them.
  std::vector<std::vector<std::byte>> abandoned_buffers_;
};

}  // namespace shardwise::detail
