#include "shardwise/comm/backend_choice.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "error_of.hpp"

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

TEST(BackendChoice, TheFlagWinsAndLeavesTheOtherArguments) {
  const BackendVariable variable("local");
  Arguments equals({"prog", "--x", "--backend=mpi", "y"});
  EXPECT_EQ(choose_backend(equals.argc(), equals.argv()), Backend::kMpi);
  EXPECT_THAT(equals.remaining(), ElementsAre("prog", "--x", "y"));
  Arguments separate({"prog", "--backend", "mpi"});
  EXPECT_EQ(choose_backend(separate.argc(), separate.argv()), Backend::kMpi);
  EXPECT_THAT(separate.remaining(), ElementsAre("prog"));
}

TEST(BackendChoice, TheVariableWinsOverTheEnvironment) {
  const BackendVariable variable("mpi");
  Arguments none({"prog"});
  EXPECT_EQ(choose_backend(none.argc(), none.argv()), Backend::kMpi);
  EXPECT_EQ(choose_backend(nullptr, nullptr), Backend::kMpi);
}

TEST(BackendChoice, WithoutEitherMpirunDecides) {
  const BackendVariable variable(nullptr);
  EXPECT_EQ(choose_backend(nullptr, nullptr),
            launched_by_mpirun() ? Backend::kMpi : Backend::kLocal);
}

TEST(BackendChoice, BadValuesNameTheirSource) {
  const BackendVariable variable("threads");
  EXPECT_THAT(error_of([] { (void)choose_backend(nullptr, nullptr); }),
              HasSubstr("SHARDWISE_BACKEND: 'threads' is not a backend (local or mpi)"));
  Arguments bad({"prog", "--backend=nccl"});
  EXPECT_THAT(error_of([&] { (void)choose_backend(bad.argc(), bad.argv()); }),
              HasSubstr("--backend: 'nccl' is not a backend (local or mpi)"));
  Arguments missing({"prog", "--backend"});
  EXPECT_THAT(error_of([&] { (void)choose_backend(missing.argc(), missing.argv()); }),
              HasSubstr("--backend: needs a value (local or mpi)"));
  EXPECT_EQ(to_string(Backend::kLocal), "local");
  EXPECT_EQ(to_string(Backend::kMpi), "mpi");
}

}  // namespace
}  // namespace shardwise
