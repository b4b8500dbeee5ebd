// MPI_Init and MPI_Finalize around a process's communicators, and run_spmd: the one place
// that chooses a backend for an SPMD program.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "mpi_backend.hpp"
#include "mpi_process.hpp"
#include "shardwise/comm/mpi.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  process_ = std::make_shared<detail::MpiProcess>();
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  world_ = std::make_unique<Communicator>(std::make_unique<detail::MpiBackend>(process_, world));
}

MpiSession::~MpiSession() {
  world_.reset();
  process_.reset();
  MPI_Finalize();
}

Communicator& MpiSession::world() { return *world_; }

bool MpiSession::aborted_by_peer() {
  (void)process_->aborted();  // takes in an abort that has arrived
  return process_->aborted_by_peer();
}

void MpiSession::abort(int status) {
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

namespace {

void write_fully(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote <= 0) return;  // Nothing sensible is left to do with a failing stderr.
    done += static_cast<std::size_t>(wrote);
  }
}

}  // namespace

int MpiSession::finish(const RankOutcome& outcome, std::chrono::milliseconds timeout) {
  const auto reports = process_->exchange_outcomes(outcome.status, outcome.own_failure,
                                                   std::chrono::steady_clock::now() + timeout);
  if (!reports) {
    std::cout.flush();
    write_fully(STDERR_FILENO, outcome.line);
    abort(outcome.status != 0 ? outcome.status : 3);
  }
  const int ranks = world_->size();
  int chosen = -1;
  for (int pass = 0; pass < 2 && chosen < 0; ++pass) {  // own failures first, then any
    for (int r = 0; r < ranks && chosen < 0; ++r) {
      const int status = (*reports)[2 * static_cast<std::size_t>(r)];
      const bool own = (*reports)[2 * static_cast<std::size_t>(r) + 1] != 0;
      if (status != 0 && (own || pass == 1)) chosen = r;
    }
  }
  if (chosen < 0) return 0;
  if (chosen == world_->rank()) {
    std::cout.flush();
    write_fully(STDERR_FILENO, outcome.line);
  }
  return (*reports)[2 * static_cast<std::size_t>(chosen)];
}

MpiSession& mpi_session(int* argc, char*** argv) {
  static MpiSession session(argc, argv);
  return session;
}

void register_mpi_backend() {
  BackendInfo mpi;
  mpi.name = "mpi";
  mpi.rank_per_process = true;
  mpi.launched = launched_by_mpirun;
  mpi.run = [](int* argc, char*** argv, int /*local_ranks*/,
               const std::function<void(Communicator&)>& fn) {
    MpiSession& session = mpi_session(argc, argv);
    try {
      fn(session.world());
    } catch (const std::exception& e) {
      // Peers waiting on this rank fail at once, seeing the abort, instead of at their timeout.
      session.world().abort(e.what());
      throw;
    }
  };
  (void)register_backend(std::move(mpi));
}

int run_spmd(int* argc, char*** argv, int local_ranks,
             const std::function<void(Communicator&)>& fn) {
  register_mpi_backend();
  const BackendInfo* backend = nullptr;
  try {
    backend = &choose_backend(argc, argv);
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  try {
    backend->run(argc, argv, local_ranks, fn);
    return 0;
  } catch (const std::exception& e) {
    if (!backend->rank_per_process) {
      std::cerr << e.what() << '\n';
      return 1;
    }
    // One write(2) for the whole line: mpirun forwards each write as it comes, and a line
    // written in pieces gets its own abort banner spliced into the middle of it.
    MpiSession& session = mpi_session(argc, argv);
    std::string line = "rank ";
    line.append(std::to_string(session.world().rank())).append(" failed: ").append(e.what());
    line.push_back('\n');
    std::cout.flush();
    write_fully(STDERR_FILENO, line);
    // mpirun exits with the abort's code: 2 for bad input, 3 for a failed runtime, 1 for
    // anything else (docs/runtime.md).
    session.abort(exit_status_of(e));
  }
}

int end_mpi_job(const ProcessResult& result, std::chrono::milliseconds timeout) {
  MpiSession& session = mpi_session();
  RankOutcome mine;
  mine.status = result.status;
  if (result.status != 0) {
    mine.own_failure = !session.aborted_by_peer();
    session.world().abort(result.message);
    mine.line = (result.where.empty() ? std::string() : result.where + ": ") + "rank " +
                std::to_string(session.world().rank()) + ": " + result.message + "\n";
  }
  return session.finish(mine, timeout);
}

int exit_status_of(const std::exception& e) {
  if (dynamic_cast<const CommError*>(&e) != nullptr) return 3;
  return dynamic_cast<const Error*>(&e) != nullptr ? 2 : 1;
}

}  // namespace shardwise
