// MPI_Init and MPI_Finalize around a process's communicators, and run_spmd: the one place
// that chooses a backend for an SPMD program.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "mpi_backend.hpp"
#include "shardwise/comm/mpi.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  auto process = std::make_shared<detail::MpiProcess>();
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  world_ = std::make_unique<Communicator>(
      std::make_unique<detail::MpiBackend>(std::move(process), world));
}

MpiSession::~MpiSession() {
  world_.reset();
  MPI_Finalize();
}

Communicator& MpiSession::world() { return *world_; }

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

void register_mpi_backend() {
  BackendInfo mpi;
  mpi.name = "mpi";
  mpi.rank_per_process = true;
  mpi.launched = launched_by_mpirun;
  mpi.run = [](int* argc, char*** argv, int /*local_ranks*/,
               const std::function<void(Communicator&)>& fn) {
    static MpiSession session(argc, argv);
    try {
      fn(session.world());
    } catch (const std::exception& e) {
      // One write(2) for the whole line: mpirun forwards each write as it comes, and a line
      // written in pieces gets its own abort banner spliced into the middle of it.
      std::string line = "rank ";
      line.append(std::to_string(session.world().rank())).append(" failed: ").append(e.what());
      line.push_back('\n');
      std::cout.flush();
      write_fully(STDERR_FILENO, line);
      // mpirun exits with the abort's code: the command's statuses (docs/runtime.md), 2 for
      // bad input, 3 for a failed runtime, 1 for anything else.
      const bool runtime = dynamic_cast<const CommError*>(&e) != nullptr;
      const bool bad_input = !runtime && dynamic_cast<const Error*>(&e) != nullptr;
      session.abort(runtime ? 3 : bad_input ? 2 : 1);
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
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}

}  // namespace shardwise
