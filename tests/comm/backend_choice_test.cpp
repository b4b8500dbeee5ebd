#include "shardwise/comm/backend_choice.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

// An argv the way main receives it, whose remaining arguments can be read back.
class Arguments {
 public:
  explicit Arguments(std::vector<std::string> words) : words_(std::move(words)) {
    for (std::string& w : words_) pointers_.push_back(w.data());
    pointers_.push_back(nullptr);
    argc_ = static_cast<int>(words_.size());
    argv_ = pointers_.data();
  }
  int* argc() { return &argc_; }
  char*** argv() { return &argv_; }
  [[nodiscard]] std::vector<std::string> remaining() const { return {argv_, argv_ + argc_}; }

 private:
  std::vector<std::string> words_;
  std::vector<char*> pointers_;
  int argc_ = 0;
  char** argv_ = nullptr;
};

// Runs with SHARDWISE_BACKEND set to `value` (or unset), restoring it afterwards.
class BackendVariable {
 public:
  explicit BackendVariable(const char* value) {
    if (const char* old = std::getenv("SHARDWISE_BACKEND")) saved_ = old;
    if (value) {
      setenv("SHARDWISE_BACKEND", value, 1);
    } else {
      unsetenv("SHARDWISE_BACKEND");
    }
  }
  ~BackendVariable() {
    if (saved_.empty()) {
      unsetenv("SHARDWISE_BACKEND");
    } else {
      setenv("SHARDWISE_BACKEND", saved_.c_str(), 1);
    }
  }
  BackendVariable(const BackendVariable&) = delete;
  BackendVariable& operator=(const BackendVariable&) = delete;

 private:
  std::string saved_;
};

// A third backend, as a TCP or NCCL one would be added: registered, and found by the flag, the
// variable and its launcher with nothing else changed. It runs its ranks as threads here and
// counts its runs; its launcher is an environment variable.
std::atomic<int> tcp_runs{0};

const BackendInfo& register_tcp() {
  BackendInfo tcp;
  tcp.name = "tcp";
  tcp.rank_per_process = true;
  tcp.launched = [] { return std::getenv("SHARDWISE_TEST_TCP_LAUNCHER") != nullptr; };
  tcp.run = [](int*, char***, int local_ranks, const std::function<void(Communicator&)>& fn) {
    ++tcp_runs;
    run_local(local_ranks, fn);
  };
  (void)register_backend(std::move(tcp));
  return *find_backend("tcp");
}

TEST(BackendChoice, TheFlagWinsAndLeavesTheOtherArguments) {
  register_tcp();
  const BackendVariable variable("local");
  Arguments equals({"prog", "--x", "--backend=tcp", "y"});
  EXPECT_EQ(choose_backend(equals.argc(), equals.argv()).name, "tcp");
  EXPECT_THAT(equals.remaining(), ElementsAre("prog", "--x", "y"));
  Arguments separate({"prog", "--backend", "tcp"});
  EXPECT_EQ(choose_backend(separate.argc(), separate.argv()).name, "tcp");
  EXPECT_THAT(separate.remaining(), ElementsAre("prog"));
}

TEST(BackendChoice, TheVariableWinsOverTheLauncher) {
  register_tcp();
  const BackendVariable variable("tcp");
  Arguments none({"prog"});
  EXPECT_EQ(choose_backend(none.argc(), none.argv()).name, "tcp");
  EXPECT_EQ(choose_backend(nullptr, nullptr).name, "tcp");
}

TEST(BackendChoice, WithoutEitherTheLauncherDecides) {
  register_tcp();
  const BackendVariable variable(nullptr);
  unsetenv("SHARDWISE_TEST_TCP_LAUNCHER");
  // Under mpirun with shardwise::mpi registered, mpi would win; this program registers none.
  EXPECT_EQ(choose_backend(nullptr, nullptr).name, "local");
  setenv("SHARDWISE_TEST_TCP_LAUNCHER", "1", 1);
  EXPECT_EQ(choose_backend(nullptr, nullptr).name, "tcp");
  unsetenv("SHARDWISE_TEST_TCP_LAUNCHER");
}

TEST(BackendChoice, ARegisteredBackendRunsTheProgram) {
  const BackendInfo& tcp = register_tcp();
  EXPECT_TRUE(tcp.rank_per_process);
  const int before = tcp_runs.load();
  std::atomic<int> ranks{0};
  Arguments flag({"prog", "--backend=tcp"});
  choose_backend(flag.argc(), flag.argv())
      .run(flag.argc(), flag.argv(), 3, [&](Communicator& comm) {
        ++ranks;
        EXPECT_EQ(comm.size(), 3);
      });
  EXPECT_EQ(ranks.load(), 3);
  EXPECT_EQ(tcp_runs.load(), before + 1);
  // The built-in local backend is listed first, then registered ones in order.
  EXPECT_EQ(backend_names().front(), "local");
  EXPECT_FALSE(find_backend("local")->rank_per_process);
}

TEST(BackendRegistry, ANameIsRegisteredOnceAndABackendNeedsANameAndARunFunction) {
  register_tcp();
  BackendInfo again;
  again.name = "tcp";
  again.run = [](int*, char***, int, const std::function<void(Communicator&)>&) {};
  EXPECT_FALSE(register_backend(again));
  EXPECT_THAT(error_of([] { (void)register_backend(BackendInfo{}); }),
              HasSubstr("register_backend: the backend has no name"));
  BackendInfo no_run;
  no_run.name = "nccl";
  EXPECT_THAT(error_of([&] { (void)register_backend(no_run); }),
              HasSubstr("backend 'nccl' has no run function"));
  EXPECT_EQ(find_backend("nccl"), nullptr);
}

TEST(BackendChoice, BadValuesNameTheirSourceAndTheRegisteredBackends) {
  register_tcp();
  const BackendVariable variable("threads");
  EXPECT_THAT(error_of([] { (void)choose_backend(nullptr, nullptr); }),
              HasSubstr("SHARDWISE_BACKEND: 'threads' is not a backend (local or tcp)"));
  Arguments bad({"prog", "--backend=nccl"});
  EXPECT_THAT(error_of([&] { (void)choose_backend(bad.argc(), bad.argv()); }),
              HasSubstr("--backend: 'nccl' is not a backend (local or tcp)"));
  Arguments missing({"prog", "--backend"});
  EXPECT_THAT(error_of([&] { (void)choose_backend(missing.argc(), missing.argv()); }),
              HasSubstr("--backend: needs a value (local or tcp)"));
}

}  // namespace
}  // namespace shardwise
