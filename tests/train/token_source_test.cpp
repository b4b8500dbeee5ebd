// Token sources: text and token files read where a batch needs them, ids checked against the
// vocabulary where they are drawn, and a file that changes under a run named, never a crash.
#include "shardwise/train/token_source.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "shardwise/train/corpus.hpp"

namespace shardwise::train {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// `ids` as little-endian integers of `width` bytes.
std::string encode(const std::vector<std::uint32_t>& ids, int width) {
  std::string bytes;
  for (const std::uint32_t id : ids) {
    for (int b = 0; b < width; ++b) bytes.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
  }
  return bytes;
}

std::vector<std::int32_t> read_all(const TokenSource& source) {
  std::vector<std::int32_t> out(source.size());
  source.read(0, out.size(), out.data());
  return out;
}

TEST(TokenSource, FormatsReadTheSameIds) {
  const std::vector<std::uint32_t> ids{0, 1, 255, 7, 65535 & 0xff, 42};
  const std::string text(ids.begin(), ids.end());
  const auto as_text = file_source(temp_file("ids.txt", text), TokenFormat::kText, "--data");
  const auto u16 =
      file_source(temp_file("ids.u16", encode(ids, 2)), TokenFormat::kTokensU16, "--data");
  const auto u32 =
      file_source(temp_file("ids.u32", encode(ids, 4)), TokenFormat::kTokensU32, "--data");
  const std::vector<std::int32_t> expected(ids.begin(), ids.end());
  EXPECT_EQ(read_all(*as_text), expected);
  EXPECT_EQ(read_all(*u16), expected);
  EXPECT_EQ(read_all(*u32), expected);
  EXPECT_EQ(u16->byte_of(3), 6U);
  EXPECT_EQ(u32->byte_of(3), 12U);
  // The whole width of each format: 65535 in u16, 2^31 - 1 in u32, and above that an id no
  // vocabulary holds.
  const auto wide16 =
      file_source(temp_file("wide.u16", encode({65535, 0}, 2)), TokenFormat::kTokensU16, "--data");
  EXPECT_EQ(read_all(*wide16), (std::vector<std::int32_t>{65535, 0}));
  const auto wide32 = file_source(temp_file("wide.u32", encode({0x7fffffff, 0x80000000}, 4)),
                                  TokenFormat::kTokensU32, "--data");
  EXPECT_EQ(read_all(*wide32), (std::vector<std::int32_t>{0x7fffffff, -1}));
}

TEST(TokenSource, FingerprintsFollowTheBytesAndTheFormat) {
  const std::string bytes = encode({1, 2, 3, 4}, 2);
  const auto a = file_source(temp_file("fa.bin", bytes), TokenFormat::kTokensU16, "--data");
  const auto b = file_source(temp_file("fb.bin", bytes), TokenFormat::kTokensU16, "--data");
  const auto as_text = file_source(temp_file("fa.bin", bytes), TokenFormat::kText, "--data");
  std::string changed = bytes;
  changed[5] = 9;
  const auto c = file_source(temp_file("fc.bin", changed), TokenFormat::kTokensU16, "--data");
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_NE(a->fingerprint(), as_text->fingerprint());
  EXPECT_NE(a->fingerprint(), c->fingerprint());
}

TEST(TokenSource, BadFilesAreNamed) {
  EXPECT_THAT(error_of([] { (void)parse_token_format("u16", "--data-format"); }),
              HasSubstr("--data-format is 'u16'; expected text, tokens-u16, tokens-u32 or jsonl"));
  EXPECT_THAT(error_of([] {
                (void)file_source("/nonexistent/train.bin", TokenFormat::kTokensU16, "--data");
              }),
              HasSubstr("cannot read --data '/nonexistent/train.bin': No such file"));
  EXPECT_THAT(error_of([] { (void)file_source("/dev/zero", TokenFormat::kText, "--val-data"); }),
              HasSubstr("--val-data '/dev/zero' is not a regular file"));
  EXPECT_THAT(
      error_of([] { (void)file_source(::testing::TempDir(), TokenFormat::kText, "--data"); }),
      HasSubstr("is not a regular file"));
  const std::string odd = temp_file("odd.u32", std::string(10, '\0'));
  EXPECT_THAT(error_of([&] { (void)file_source(odd, TokenFormat::kTokensU32, "--data"); }),
              HasSubstr("'" + odd +
                        "' has 10 bytes, not a whole number of 4-byte token ids "
                        "(tokens-u32)"));
}

// A file that shrinks under a run: the read that finds it shorter names it; a mapping would end
// the process with SIGBUS instead.
TEST(TokenSource, AFileThatShrinksWhileReadIsAnError) {
  const std::string path = temp_file("shrinks.u16", encode(std::vector<std::uint32_t>(1000, 5), 2));
  const auto source = file_source(path, TokenFormat::kTokensU16, "--data");
  ASSERT_EQ(source->size(), 1000U);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  std::vector<std::int32_t> out(10);
  source->read(0, 10, out.data());  // still within the file
  EXPECT_THAT(error_of([&] { source->read(900, 10, out.data()); }),
              HasSubstr("--data '" + path +
                        "': cannot read bytes 1800 to 1820 (the file is "
                        "shorter than when it was opened: it changed while the run read it)"));
  // Growing is harmless: the run reads the tokens that were there when it opened the file.
  std::ofstream(path, std::ios::binary | std::ios::app) << std::string(4000, '\1');
  EXPECT_EQ(source->size(), 1000U);
}

TEST(Corpus, TooShortEmptyAndOutOfVocabularyAreNamed) {
  const std::string empty = temp_file("empty.u16", "");
  EXPECT_THAT(error_of([&] {
                (void)Corpus(file_source(empty, TokenFormat::kTokensU16, "--data"), nullptr, 16,
                             256);
              }),
              HasSubstr("--data '" + empty +
                        "' has 0 tokens; sequences of 16 tokens need at "
                        "least 170 (a tenth is held out"));
  const std::string short_file = temp_file("short.u16", encode({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 2));
  const auto valid =
      file_source(temp_file("valid.u16", encode(std::vector<std::uint32_t>(40, 3), 2)),
                  TokenFormat::kTokensU16, "--val-data");
  EXPECT_THAT(error_of([&] {
                (void)Corpus(file_source(short_file, TokenFormat::kTokensU16, "--data"), valid, 16,
                             256);
              }),
              HasSubstr("--data '" + short_file +
                        "' has 10 tokens; sequences of 16 tokens need "
                        "at least 17 (one sequence and its targets)"));
  EXPECT_THAT(error_of([&] {
                (void)Corpus(valid, file_source(short_file, TokenFormat::kTokensU16, "--val-data"),
                             16, 256);
              }),
              HasSubstr("--val-data '" + short_file + "' has 10 tokens"));
  // Every id is read when the corpus is made, so the id 300 at token 11 is refused before any
  // step, named by its index and byte, in the training data and in the held-out data alike.
  std::vector<std::uint32_t> ids(4000, 7);
  ids[3011] = 300;
  const std::string bad = temp_file("bad.u16", encode(ids, 2));
  EXPECT_THAT(error_of([&] {
                (void)Corpus(file_source(bad, TokenFormat::kTokensU16, "--data"), valid, 16, 256);
              }),
              HasSubstr("--data '" + bad +
                        "': token 3011 (byte 6022) is the id 300, outside the "
                        "model's vocabulary 0..255"));
  EXPECT_THAT(error_of([&] {
                (void)Corpus(valid, file_source(bad, TokenFormat::kTokensU16, "--val-data"), 16,
                             256);
              }),
              HasSubstr("--val-data '" + bad + "': token 3011 (byte 6022) is the id 300"));
  // The same ids are valid for a larger vocabulary.
  const Corpus wider(file_source(bad, TokenFormat::kTokensU16, "--data"), valid, 16, 50257);
  std::int32_t read_back = 0;
  file_source(bad, TokenFormat::kTokensU16, "--data")->read(3011, 1, &read_back);
  EXPECT_EQ(read_back, 300);
  ids[3011] = 0x80000000U;
  const std::string huge = temp_file("huge.u32", encode(ids, 4));
  EXPECT_THAT(error_of([&] {
                (void)Corpus(file_source(huge, TokenFormat::kTokensU32, "--data"), valid, 16,
                             50257);
              }),
              HasSubstr("token 3011 (byte 12044) is the id above 2^31"));
}

// A sparse token file's holes read as the id 0; an id after a hole is still found.
TEST(Corpus, FindsABadIdAfterAHoleOfASparseFile) {
  const std::string path = ::testing::TempDir() + "/sparse.u16";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.seekp((std::streamoff{64} << 20) - 2);  // 64 MiB, a hole before the last id
    const unsigned char id[2] = {0x2c, 0x01};   // 300
    out.write(reinterpret_cast<const char*>(id), 2);
  }
  const auto source = file_source(path, TokenFormat::kTokensU16, "--data");
  EXPECT_EQ(source->first_outside(256), source->size() - 1);
  EXPECT_EQ(source->first_outside(301), std::nullopt);
}

// A validation file of its own holding the last tenth of a file draws the same held-out
// sequences as that file with its tenth held out, and training draws the same sequences from the
// first nine tenths.
TEST(Corpus, AValidationFileIsTheHeldOutTenthMadeExplicit) {
  std::string text;
  for (int i = 0; text.size() < 5000; ++i) text += "line " + std::to_string(i * 7919 % 1000) + "\n";
  const std::size_t train_end = text.size() - text.size() / 10;
  const Corpus whole(bytes_source(text, "whole"), nullptr, 32, 256);
  const Corpus split(bytes_source(text.substr(0, train_end), "train"),
                     bytes_source(text.substr(train_end), "val"), 32, 256);
  EXPECT_EQ(whole.train_tokens(), split.train_tokens());
  EXPECT_EQ(whole.val_tokens(), split.val_tokens());
  for (std::uint64_t step = 0; step < 5; ++step) {
    for (const auto which : {Corpus::Split::kTrain, Corpus::Split::kValidation}) {
      const TokenBatch a = whole.batch(which, 9, step, 4, 0, 4, 32);
      const TokenBatch b = split.batch(which, 9, step, 4, 0, 4, 32);
      EXPECT_EQ(a.tokens, b.tokens);
      EXPECT_EQ(a.targets, b.targets);
    }
  }
}

}  // namespace
}  // namespace shardwise::train
