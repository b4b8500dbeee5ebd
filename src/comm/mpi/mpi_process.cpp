#include "mpi_process.hpp"

#include <algorithm>
#include <thread>

namespace shardwise::detail {
namespace {

constexpr int kAbortTag = 7;

}  // namespace

MpiProcess::MpiProcess() {
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Comm_dup(MPI_COMM_WORLD, &channel_);
  MPI_Comm_set_errhandler(channel_, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &outcomes_);
  MPI_Comm_set_errhandler(outcomes_, MPI_ERRORS_RETURN);
}

MpiProcess::~MpiProcess() {
  // Abort messages that no rank received are cancelled rather than waited for.
  for (MPI_Request& request : sends_) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  MPI_Comm_free(&channel_);
  MPI_Comm_free(&outcomes_);
}

void MpiProcess::abort(const std::string& reason) {
  if (!aborted_) aborted_ = "rank " + std::to_string(world_rank_) + " aborted: " + reason;
  if (told_peers_) return;  // every rank has the message already
  told_peers_ = true;
  messages_.push_back(std::make_unique<std::string>(*aborted_));
  const std::string& text = *messages_.back();
  for (int r = 0; r < world_size_; ++r) {
    if (r == world_rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, kAbortTag, channel_,
              &request);
    sends_.push_back(request);
  }
}

const std::optional<std::string>& MpiProcess::aborted() {
  if (aborted_) return aborted_;
  int waiting = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, channel_, &waiting, &status);
  if (waiting != 0) {
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<std::size_t>(length), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kAbortTag, channel_,
             MPI_STATUS_IGNORE);
    aborted_ = std::move(text);
    aborted_by_peer_ = true;
  }
  return aborted_;
}

std::optional<std::vector<int>> MpiProcess::exchange_outcomes(
    int status, bool own_failure, std::chrono::steady_clock::time_point deadline) {
  const int mine[2] = {status, own_failure ? 1 : 0};
  std::vector<int> all(2 * static_cast<std::size_t>(world_size_));
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, outcomes_, &request) !=
      MPI_SUCCESS) {
    return std::nullopt;
  }
  for (auto pause = std::chrono::microseconds(1);;
       pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return std::nullopt;
    if (done) return all;
    // The request stays posted: the job ends with MPI_Abort next.
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace shardwise::detail
