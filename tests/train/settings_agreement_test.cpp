// Ranks that run with other settings are told so on every rank, naming the first rank and
// setting that differ; ranks that agree go on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>

#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/settings_agreement.hpp"

namespace shardwise::train {
namespace {

TEST(SettingsAgreement, EveryRankNamesTheFirstThatDiffers) {
  std::mutex mutex;
  std::vector<std::string> errors;
  run_local(4, [&](Communicator& comm) {
    check_ranks_agree(comm, {{"--seed", "7"}, {"--lr", "0.001"}});
    // Rank 2 runs with another learning rate, rank 3 with another seed too.
    const std::string seed = comm.rank() == 3 ? "8" : "7";
    const std::string lr = comm.rank() >= 2 ? "0.002" : "0.001";
    try {
      check_ranks_agree(comm, {{"--seed", seed}, {"--lr", lr}});
    } catch (const InvalidArgument& e) {
      const std::lock_guard lock(mutex);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 4U);
  for (const std::string& error : errors) {
    EXPECT_EQ(error,
              "rank 2 runs with another --lr than rank 0; every rank of a run needs the same "
              "flags and data");
  }
}

TEST(SettingsAgreement, TheSameValueUnderAnotherNameDisagrees) {
  std::mutex mutex;
  int refused = 0;
  run_local(2, [&](Communicator& comm) {
    try {
      check_ranks_agree(comm, {{comm.rank() == 0 ? "--seed" : "--steps", "7"}});
    } catch (const InvalidArgument&) {
      const std::lock_guard lock(mutex);
      ++refused;
    }
  });
  EXPECT_EQ(refused, 2);
}

}  // namespace
}  // namespace shardwise::train
