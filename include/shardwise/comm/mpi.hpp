#pragma once
// The MPI backend: one rank per process under mpirun (OpenMPI). Axis groups become MPI
// communicators of their members (created once, in group order); every collective is MPI's own,
// after the members have exchanged signatures of the call (so that a mismatched call is an
// error, not a hang). Operations progress inside MPI calls: Work::test and wait, and every later
// call on the same communicator.
// Link shardwise::mpi to use it; the rest of shardwise never needs MPI.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/communicator.hpp"

namespace shardwise {

namespace detail {
class MpiProcess;
}  // namespace detail

// What one process of a job has to say when it ends: its exit status (0 for success) and, when
// it failed, whether the failure was its own rather than the consequence of another rank's
// abort, and the line to print.
struct RankOutcome {
  int status = 0;
  bool own_failure = false;
  std::string line;  // one line, ending in a newline
};

// Initialises MPI for its lifetime (thread support: funneled) and owns the world communicator.
// One per process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  MpiSession(MpiSession&&) = delete;
  MpiSession& operator=(MpiSession&&) = delete;

  [[nodiscard]] Communicator& world();
  // Whether another rank's abort has reached this process: a failure now is its consequence.
  [[nodiscard]] bool aborted_by_peer();
  // Ends every process of the job (after a rank failed), with this exit status.
  [[noreturn]] void abort(int status);

  // Ends a job cleanly, without MPI_Abort and its banner: every process reports its outcome;
  // the lowest rank whose failure was its own (else the lowest that failed) writes its line to
  // stderr in one write, and every process returns that rank's status (0 when none failed), so
  // that each exits with it after MPI is finalised. A process whose peers do not all report
  // within `timeout` (one hangs) writes its own line and ends the job with MPI_Abort.
  [[nodiscard]] int finish(const RankOutcome& outcome, std::chrono::milliseconds timeout);

 private:
  std::shared_ptr<detail::MpiProcess> process_;
  std::unique_ptr<Communicator> world_;
};

// This process's session, started (MPI_Init) on the first call and finalised at exit: the one
// the MPI backend runs on.
MpiSession& mpi_session(int* argc = nullptr, char*** argv = nullptr);

// Registers the MPI backend ("mpi": a rank per process, the default under mpirun) in the
// backend registry; calling it again does nothing. Its run function starts MPI once per
// process (finalised at exit); when the rank fails, it tells every other rank (whose operations
// then fail at once) and rethrows.
void register_mpi_backend();

// Runs fn on every rank of the backend choose_backend picks (`--backend NAME`, else
// SHARDWISE_BACKEND, else mpi under mpirun), with the MPI backend registered: on mpi one rank
// per process, on local `local_ranks` threads of this process. A rank whose fn throws ends the
// whole job with its message, as run_local does. Returns the process exit status.
int run_spmd(int* argc, char*** argv, int local_ranks,
             const std::function<void(Communicator&)>& fn);

// How this process's part of an MPI job ended: its exit status (0 for success) and, for a
// failure, a one-line message and where it comes from ("shardwise train"; may be empty).
struct ProcessResult {
  int status = 0;
  std::string where;
  std::string message;
};

// Ends this process's part of an MPI job without MPI_Abort: a failure is told to every other
// rank (their operations then fail at once) and counts as this rank's own unless another rank's
// abort reached this one first; then MpiSession::finish, the line being "WHERE: rank R:
// MESSAGE". Returns the job's status for this process to exit with.
int end_mpi_job(const ProcessResult& result, std::chrono::milliseconds timeout);

// The exit status of a process that failed with `e`: 3 when the runtime failed (CommError), 2
// for bad input (any other shardwise::Error), 1 otherwise.
int exit_status_of(const std::exception& e);

}  // namespace shardwise
