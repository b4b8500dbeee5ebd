#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using ::testing::HasSubstr;
using testing::json_lines;
using testing::run_command;

TEST(BenchCommand, CommRowsHaveEveryField) {
  const auto r = run_command({"bench", "comm", "--ranks", "2,3", "--sizes", "4K,12K", "--ops",
                              "all_reduce,all_gather", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u * 2u * 2u);
  for (const auto& row : rows) {
    for (const char* key : {"op", "backend", "ranks", "bytes", "seconds", "algbw_gbps",
                            "busbw_gbps", "memcpy_gbps", "mpi_raw_busbw_gbps"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
    EXPECT_EQ(row["backend"], "local");
    EXPECT_GT(row["seconds"].get<double>(), 0);
    const double factor = row["op"] == "all_reduce"
                              ? 2.0 * (row["ranks"].get<int>() - 1) / row["ranks"].get<int>()
                              : (row["ranks"].get<int>() - 1.0) / row["ranks"].get<int>();
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * factor, 1e-9);
    EXPECT_TRUE(row["mpi_raw_busbw_gbps"].is_null());
  }
}

TEST(BenchCommand, ReshardCoversEveryPair) {
  const auto r = run_command({"bench", "reshard", "--ranks", "4", "--bytes", "64K", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = json_lines(r.out);
  EXPECT_EQ(rows.size(), 36u);
  EXPECT_EQ(rows[0]["from"], "P()");
  EXPECT_EQ(rows[6]["to"], "P()");
  EXPECT_EQ(rows[6]["max_rank_bytes"], 65536 / 2);  // rows split over 'data' (2): half is missing
}

TEST(BenchCommand, BadInput) {
  testing::expect_bad_input({"bench", "comm", "--sizes", "12Q"},
                            "--sizes: size '12Q' is not a number of bytes");
  testing::expect_bad_input({"bench", "comm", "--sizes", "16G"},
                            "--sizes: size '16G' is outside 4 bytes to 4G");
  testing::expect_bad_input({"bench", "comm", "--sizes", "99999999999999999999K"},
                            "--sizes: size '99999999999999999999K' is outside");
  testing::expect_bad_input({"bench", "comm", "--sizes", "2"}, "size '2' is outside 4 bytes");
  testing::expect_bad_input({"bench", "comm", "--sizes", "-4K"}, "size '-4K' is not a number");
  testing::expect_bad_input({"bench", "comm", "--ranks", "100000", "--sizes", "4K"},
                            "--ranks is 100000; expected 1 to 256 ranks");
  testing::expect_bad_input({"bench", "comm", "--ranks", "", "--sizes", "4K"}, "--ranks is ''");
  testing::expect_bad_input({"bench", "comm", "--ranks", "0", "--sizes", "4K"}, "--ranks is 0");
  testing::expect_bad_input({"bench", "reshard", "--ranks", "0", "--bytes", "4K"},
                            "--ranks is 0; expected 1 to 256 ranks");
  testing::expect_bad_input({"bench", "reshard", "--ranks", "256", "--bytes", "4G"},
                            "--bytes 4G needs about");
  testing::expect_bad_input({"bench", "comm", "--ops", "gossip", "--sizes", "4K"},
                            "'gossip' is not one of all_reduce");
  testing::expect_bad_input({"bench", "reshard", "--ranks", "3", "--bytes", "4K"},
                            "--ranks is 3; bench reshard needs an even number of ranks");
  testing::expect_bad_input({"bench"}, "shardwise bench: expected a command: comm, reshard");
  testing::expect_bad_input({"bench", "foo"}, "bench: unknown command 'foo'; expected one of");
}

}  // namespace
}  // namespace shardwise::cli
