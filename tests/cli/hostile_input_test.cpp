// Hostile input to the command: every case is refused with one line on stderr, nothing on
// stdout and exit status 2, quickly and without exhausting memory; numbers are quoted as given.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using ::testing::HasSubstr;
using testing::run_command;

// A file in the test's temporary directory with this content.
std::string temp_file(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

std::string llama_config(const std::string& overrides) {
  return R"({"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048,
             "intermediate_size": 5632, "num_attention_heads": 32)" +
         overrides + "}";
}

TEST(HostileInput, OverflowingSizesAreRefusedNotWrapped) {
  expect_bad_input({"layout", "--mesh", "data=2", "--shape", "4611686018427387904,4"},
                   "shape (4611686018427387904, 4) has more elements than a 64-bit integer");
  expect_bad_input({"layout", "--mesh", "data=2", "--shape", "9223372036854775808"},
                   "integer out of range: '9223372036854775808'");
  const std::string huge = temp_file("huge.json", R"({"parameters": [{"name": "w", "shape":
      [9223372036854775807, 9223372036854775807, 9223372036854775807]}]})");
  expect_bad_input({"specs", "--model", huge, "--mesh", "data=2"}, "more elements than");
  const std::string bytes = temp_file("bytes.json", R"({"parameters": [
      {"name": "a", "shape": [4611686018427387903], "dtype": "f32"}]})");
  expect_bad_input({"specs", "--model", bytes, "--mesh", "data=2"},
                   "4611686018427387903 x 4 does not fit in a 64-bit integer");
  const std::string unsigned_json = temp_file(
      "unsigned.json", R"({"parameters": [{"name": "w", "shape": [18446744073709551615]}]})");
  expect_bad_input({"specs", "--model", unsigned_json, "--mesh", "data=2"},
                   "field 'parameters[0].shape[0]' is 18446744073709551615, beyond the largest");
  const std::string head_dim = temp_file("head_dim.json", llama_config(R"(, "num_hidden_layers": 2,
                                                 "head_dim": 4611686018427387904)"));
  expect_bad_input({"specs", "--model", head_dim, "--mesh", "data=2"},
                   "llama config 'head_dim' is 4611686018427387904; at most 1048576 is read");
  const std::string vocab =
      temp_file("vocab.json", R"({"model_type": "llama", "vocab_size": 4611686018427387904,
          "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 2,
          "num_attention_heads": 32})");
  expect_bad_input({"specs", "--model", vocab, "--mesh", "data=2"},
                   "llama config 'vocab_size' is 4611686018427387904; at most 1048576 is read");
}

TEST(HostileInput, UnevenShardsOfTheLargestSizeStayExact) {
  const auto r = run_command({"layout", "--uneven", "--mesh", "data=2", "--spec", "P('data')",
                              "--shape", "9223372036854775807", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"("shard_shape":[4611686018427387904])"));
  EXPECT_THAT(r.out, HasSubstr("[[4611686018427387904,9223372036854775807]]"));
}

TEST(HostileInput, ResourceExhaustionIsBounded) {
  expect_bad_input({"layout", "--mesh", "data=999999999", "--shape", "4"},
                   "has more than 1048576 devices");
  for (const char* layers : {"10000000", "1000000000000"}) {
    const std::string path =
        temp_file("layers.json", llama_config(std::string(R"(, "num_hidden_layers": )") + layers));
    expect_bad_input({"specs", "--model", path, "--mesh", "data=2"},
                     std::string("'num_hidden_layers' is ") + layers + "; at most 10000 layers");
  }
  expect_bad_input({"specs", "--model", "/dev/zero", "--mesh", "data=2"},
                   "--model '/dev/zero' is not a regular file");
  expect_bad_input({"specs", "--model", ::testing::TempDir(), "--mesh", "data=2"},
                   "is a directory, not a file");
  const std::string fifo = ::testing::TempDir() + "/fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_bad_input({"specs", "--model", fifo, "--mesh", "data=2"}, "is not a regular file");
  std::remove(fifo.c_str());
  // A huge mesh lists its first devices and says it cannot draw the rest.
  const auto r = run_command({"layout", "--mesh", "data=512,model=512", "--spec",
                              "P('data', 'model')", "--shape", "512,512"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("... and 258048 more devices (--json lists every one)"));
  EXPECT_THAT(r.out, HasSubstr("(512 x 512 blocks are too many to draw in a terminal)"));
}

TEST(HostileInput, JsonNumbersBeyondADoubleAreBadInput) {
  // 1e999 anywhere, an ignored key of a config.json included.
  const std::string path =
      temp_file("inf.json", llama_config(R"(, "num_hidden_layers": 2, "rope_theta": 1e999)"));
  expect_bad_input({"specs", "--model", path, "--mesh", "data=2"},
                   "inf.json': number overflow parsing '1e999'");
  const std::string rules =
      temp_file("rules.json", R"({"logical_axis_rules": [["a", "b", 1e999]]})");
  expect_bad_input({"specs", "--model", path, "--mesh", "data=2", "--rules", rules},
                   "invalid JSON");
}

TEST(HostileInput, ErrorsNameWhatWasWrong) {
  expect_bad_input({"--bogus"}, "unknown option '--bogus'; expected a command: layout");
  expect_bad_input({"bench", "foo"}, "shardwise bench: unknown command 'foo'");
  expect_bad_input({"bench", "reshard", "--ranks", "0"}, "--ranks is 0");
  // Echoed input is cut short and its control characters escaped.
  const std::string long_spec = "P(" + std::string(60000, 'a') + "\n)";
  const auto r = run_command({"layout", "--mesh", "data=2", "--spec", long_spec, "--shape", "4"});
  EXPECT_EQ(r.status, 2);
  EXPECT_LT(r.err.size(), 1200u);
  EXPECT_THAT(r.err, HasSubstr("more bytes)"));
  expect_bad_input({"layout", "--mesh", "da\x01ta=2", "--shape", "4"}, "'da\\x01ta=2'");
}

TEST(HostileInput, AcceptedBadInputIsRefused) {
  expect_bad_input({"layout", "--mesh", "data=2", "--devices", "", "--shape", "4"},
                   "--devices is empty");
  expect_bad_input({"layout", "--mesh", "Mesh('data': 2, 'model': 2, devices=[3, 2, 1, 0])",
                    "--devices", "0,1,2,3", "--shape", "4"},
                   "--devices 0,1,2,3 disagrees with the device ids of --mesh");
  const auto same = run_command({"layout", "--mesh", "Mesh('data': 2, devices=[1, 0])", "--devices",
                                 "1,0", "--shape", "4", "--json"});
  EXPECT_EQ(same.status, 0) << same.err;
  expect_bad_input({"bench", "comm", "--ranks", "", "--sizes", "4K"}, "--ranks is ''");
  expect_bad_input({"schedule", "--stages", "4", "--microbatches", "8", "--virtual", "-3"},
                   "--virtual is -3");
}

TEST(HostileInput, AFailedWriteExitsNonZero) {
  std::ofstream full("/dev/full");
  if (!full) GTEST_SKIP() << "no /dev/full here";
  std::ostringstream err;
  const int status = run({"layout", "--mesh", "data=2", "--shape", "4"}, full, err);
  EXPECT_EQ(status, 1);
  EXPECT_THAT(err.str(), HasSubstr("writing the output failed"));
}

}  // namespace
}  // namespace shardwise::cli
