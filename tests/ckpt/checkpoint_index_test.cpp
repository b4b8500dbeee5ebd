// A checkpoint's index.json and a .safetensors file are input from disk, so anything else may
// have written them: good ones parse to what they say, and hostile ones (bad JSON, shards that
// overlap, leave gaps or share bytes, checksum lists out of proportion, file names that leave
// the folder, header lengths of 2^63) are refused with an error of the right class naming the
// field and the value, before anything is allocated for them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "shardwise/ckpt/array_block.hpp"
#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/safetensors.hpp"

namespace shardwise::ckpt {
namespace {

using ::testing::HasSubstr;

// The message of the E that `f` throws. Any other outcome (no error, or a shardwise::Error of
// another class) fails the test by itself, so that an assertion on the words returned asserts
// the class as well: callers catch CheckpointError, and a ParseError or InvalidArgument would
// pass them by.
template <typename E, typename F>
std::string error_message(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    if (dynamic_cast<const E*>(&e) == nullptr) {
      ADD_FAILURE() << "an error of another class than expected: " << e.what();
    }
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "<no error>";
}

std::string index_error(const std::string& text) {
  return error_message<CheckpointError>([&] { (void)parse_checkpoint_index(text, "index.json"); });
}

std::string header_error(const std::string& header, std::uint64_t data_bytes = 1024) {
  return error_message<ParseError>([&] { (void)parse_safetensors_header(header, data_bytes); });
}

// `text` with the first occurrence of `from` replaced by `to` (a test failure when there is none,
// so that a case cannot silently test the good input).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "'" << from << "' is not in " << text;
    return text;
  }
  return text.replace(at, from.size(), to);
}

// The JSON of index entries, each value written as the JSON text it is in the file.
std::string shard(const std::string& box, const std::string& file, std::uint64_t offset,
                  std::uint64_t length, std::uint64_t chunk_bytes, const std::string& crc32c) {
  return R"({"box": )" + box + R"(, "file": ")" + file + R"(", "offset": )" +
         std::to_string(offset) + R"(, "length": )" + std::to_string(length) +
         R"(, "chunk_bytes": )" + std::to_string(chunk_bytes) + R"(, "crc32c": )" + crc32c + "}";
}

std::string array_entry(const std::string& shape, const std::string& dtype,
                        const std::vector<std::string>& shards) {
  std::string list;
  for (const std::string& s : shards) list += (list.empty() ? "" : ", ") + s;
  return R"({"shape": )" + shape + R"(, "dtype": ")" + dtype +
         R"(", "sharding": "rows over data", "shards": [)" + list + "]}";
}

std::string index_of(const std::string& arrays, const std::string& metadata = R"({"step": 7})") {
  return R"({"format": "shardwise-checkpoint", "version": 1, "metadata": )" + metadata +
         R"(, "arrays": {)" + arrays + "}}";
}

// An index of one array 'w' of `shape` and `dtype`, saved as `shards`.
std::string index_of_w(const std::vector<std::string>& shards, const std::string& shape = "[4, 2]",
                       const std::string& dtype = "F32") {
  return index_of(R"("w": )" + array_entry(shape, dtype, shards));
}

// The two halves of a (4, 2) f32 array, each in a file of its own, with two checksummed chunks.
std::string top_shard() {
  return shard("[[0, 2], [0, 2]]", "rank-00000.safetensors", 0, 16, 8, "[1, 2]");
}
std::string bottom_shard() {
  return shard("[[2, 4], [0, 2]]", "rank-00001.safetensors", 0, 16, 8, "[3, 4]");
}
std::string good_index() { return index_of_w({top_shard(), bottom_shard()}); }

ShardRecord shard_record(ShardIndex box, std::string file, std::uint64_t offset,
                         std::uint64_t length, std::uint64_t chunk_bytes,
                         std::vector<std::uint32_t> crc32c) {
  ShardRecord record;
  record.box = std::move(box);
  record.file = std::move(file);
  record.offset = offset;
  record.length = length;
  record.chunk_bytes = chunk_bytes;
  record.crc32c = std::move(crc32c);
  return record;
}

ArrayRecord array_record(std::string name, Shape shape, DType dtype,
                         std::vector<ShardRecord> shards) {
  ArrayRecord record;
  record.name = std::move(name);
  record.shape = std::move(shape);
  record.dtype = dtype;
  record.sharding = "rows over data";
  record.shards = std::move(shards);
  return record;
}

// Two arrays, three shards, checksummed and not, sharing one file without sharing bytes.
CheckpointIndex memory_index() {
  CheckpointIndex index;
  index.metadata_json = R"({"data":{"position":123},"model":"gpt2","step":7})";
  index.arrays.push_back(array_record(
      "bias", {4}, DType::kBF16,
      {shard_record({{0, 4}}, "rank-00000.safetensors", 32, 8, 4, {10, 4294967295U})}));
  index.arrays.push_back(
      array_record("weight", {4, 2}, DType::kF32,
                   {shard_record({{0, 2}, {0, 2}}, "rank-00000.safetensors", 0, 16, 8, {1, 2}),
                    shard_record({{2, 4}, {0, 2}}, "rank-00001.safetensors", 0, 16, 16, {9})}));
  return index;
}

void expect_same_arrays(const CheckpointIndex& a, const CheckpointIndex& b) {
  ASSERT_EQ(a.arrays.size(), b.arrays.size());
  for (std::size_t i = 0; i < a.arrays.size(); ++i) {
    const ArrayRecord& x = a.arrays[i];
    const ArrayRecord& y = b.arrays[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape) << x.name;
    EXPECT_EQ(x.dtype, y.dtype) << x.name;
    EXPECT_EQ(x.sharding, y.sharding) << x.name;
    ASSERT_EQ(x.shards.size(), y.shards.size()) << x.name;
    for (std::size_t s = 0; s < x.shards.size(); ++s) {
      EXPECT_EQ(x.shards[s].box, y.shards[s].box) << x.name << " shard " << s;
      EXPECT_EQ(x.shards[s].file, y.shards[s].file) << x.name << " shard " << s;
      EXPECT_EQ(x.shards[s].offset, y.shards[s].offset) << x.name << " shard " << s;
      EXPECT_EQ(x.shards[s].length, y.shards[s].length) << x.name << " shard " << s;
      EXPECT_EQ(x.shards[s].chunk_bytes, y.shards[s].chunk_bytes) << x.name << " shard " << s;
      EXPECT_EQ(x.shards[s].crc32c, y.shards[s].crc32c) << x.name << " shard " << s;
    }
  }
}

TEST(CheckpointIndex, ParsesAWellFormedIndex) {
  // "w" is listed before "bias" and its bottom shard before its top: arrays come back in name
  // order, shards in the order listed.
  const std::string text = index_of(
      R"("w": )" + array_entry("[4, 2]", "F32", {bottom_shard(), top_shard()}) + R"(, "bias": )" +
          array_entry("[4]", "BF16",
                      {shard("[[0, 4]]", "rank-00000.safetensors", 32, 8, 4, "[10, 4294967295]")}),
      R"({"step": 7, "model": "gpt2", "data": {"position": 123}})");
  const CheckpointIndex index = parse_checkpoint_index(text, "index.json");
  ASSERT_EQ(index.arrays.size(), 2U);
  const ArrayRecord& bias = index.arrays[0];
  EXPECT_EQ(bias.name, "bias");
  EXPECT_EQ(bias.shape, (Shape{4}));
  EXPECT_EQ(bias.dtype, DType::kBF16);
  EXPECT_EQ(bias.sharding, "rows over data");
  ASSERT_EQ(bias.shards.size(), 1U);
  EXPECT_EQ(bias.shards[0].box, (ShardIndex{{0, 4}}));
  EXPECT_EQ(bias.shards[0].file, "rank-00000.safetensors");
  EXPECT_EQ(bias.shards[0].offset, 32U);
  EXPECT_EQ(bias.shards[0].length, 8U);
  EXPECT_EQ(bias.shards[0].chunk_bytes, 4U);
  EXPECT_EQ(bias.shards[0].crc32c, (std::vector<std::uint32_t>{10, 4294967295U}));
  const ArrayRecord& w = index.arrays[1];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (Shape{4, 2}));
  EXPECT_EQ(w.dtype, DType::kF32);
  ASSERT_EQ(w.shards.size(), 2U);
  EXPECT_EQ(w.shards[0].box, (ShardIndex{{2, 4}, {0, 2}}));
  EXPECT_EQ(w.shards[0].file, "rank-00001.safetensors");
  EXPECT_EQ(w.shards[1].box, (ShardIndex{{0, 2}, {0, 2}}));
  EXPECT_EQ(w.shards[1].crc32c, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(index.total_bytes(), 40U);
  EXPECT_EQ(index.find("w"), &index.arrays[1]);
  EXPECT_EQ(index.find("bias"), &index.arrays[0]);
  EXPECT_EQ(index.find("v"), nullptr);
  // The metadata as the writer handed it in, re-serialized (keys sorted, no spaces).
  EXPECT_EQ(index.metadata_json, R"({"data":{"position":123},"model":"gpt2","step":7})");
}

TEST(CheckpointIndex, RoundTripsThroughItsJson) {
  const CheckpointIndex index = memory_index();
  check_consistent(index, "memory");
  const std::string text = checkpoint_index_json(index);
  const CheckpointIndex parsed = parse_checkpoint_index(text, "index.json");
  expect_same_arrays(index, parsed);
  EXPECT_EQ(parsed.metadata_json, index.metadata_json);
  EXPECT_EQ(parsed.total_bytes(), 40U);
  // Written again, it is the same text: nothing is lost or reordered on the way.
  EXPECT_EQ(checkpoint_index_json(parsed), text);
}

TEST(CheckpointIndex, AcceptsEmptyCheckpointsAndZeroSizedArrays) {
  // An index of no arrays is consistent (nothing to cover): accepted, and loading it into a
  // model that has parameters is refused by require_arrays instead.
  const CheckpointIndex empty = parse_checkpoint_index(index_of(""), "index.json");
  EXPECT_TRUE(empty.arrays.empty());
  EXPECT_EQ(empty.total_bytes(), 0U);
  EXPECT_THAT(error_message<CheckpointError>([&] { require_arrays(empty, {"w"}, "index.json"); }),
              HasSubstr("lacks 1 arrays the model needs: 'w'"));
  // An array without elements, split in two empty shards at the same offset of one file: empty
  // shards share no bytes.
  const CheckpointIndex zero = parse_checkpoint_index(
      index_of_w({shard("[[0, 0], [0, 1]]", "rank-00000.safetensors", 0, 0, 8, "[]"),
                  shard("[[0, 0], [1, 2]]", "rank-00000.safetensors", 0, 0, 8, "[]")},
                 "[0, 2]"),
      "index.json");
  ASSERT_EQ(zero.arrays.size(), 1U);
  EXPECT_EQ(zero.arrays[0].shards.size(), 2U);
  EXPECT_EQ(zero.total_bytes(), 0U);
  // Shards that touch in one file without sharing bytes, a last chunk shorter than the others,
  // checksums of 2^32 - 1.
  EXPECT_NO_THROW((void)parse_checkpoint_index(
      index_of_w({shard("[[0, 2], [0, 2]]", "rank-00000.safetensors", 0, 16, 3,
                        "[0, 1, 2, 3, 4, 4294967295]"),
                  shard("[[2, 4], [0, 2]]", "rank-00000.safetensors", 16, 16, 16, "[7]")}),
      "index.json"));
}

TEST(CheckpointIndex, RefusesTextThatIsNotAnIndex) {
  const std::string good = good_index();
  EXPECT_NO_THROW((void)parse_checkpoint_index(good, "index.json"));
  EXPECT_THAT(index_error("{"), HasSubstr("invalid JSON in index.json"));
  EXPECT_THAT(index_error(""), HasSubstr("invalid JSON in index.json"));
  EXPECT_THAT(index_error(good + "x"), HasSubstr("invalid JSON in index.json"));
  EXPECT_THAT(index_error("[]"), HasSubstr("index.json is not a JSON object"));
  // Bytes that are not UTF-8 inside a string (JSON text is UTF-8; names must be comparable).
  EXPECT_THAT(index_error(replaced(good, "rows over data", "rows \xff\xfe over data")),
              HasSubstr("ill-formed UTF-8"));
  EXPECT_THAT(index_error(replaced(good, "rows over data", "rows \xc0\xaf over data")),
              HasSubstr("invalid JSON in index.json"));
  // One key twice: a JSON parser would keep the second array and drop the first in silence.
  EXPECT_THAT(
      index_error(index_of(R"("w": )" + array_entry("[4, 2]", "F32", {top_shard()}) + R"(, "w": )" +
                           array_entry("[4, 2]", "F32", {top_shard(), bottom_shard()}))),
      HasSubstr(R"(index.json has the key "w" twice in one object)"));
  EXPECT_THAT(index_error(replaced(good, R"("offset": 0,)", R"("offset": 0, "offset": 64,)")),
              HasSubstr(R"(has the key "offset" twice)"));
  EXPECT_THAT(
      index_error(replaced(good, R"("shardwise-checkpoint")", R"("safetensors")")),
      HasSubstr(R"(index.json: "format" is "safetensors"; expected "shardwise-checkpoint")"));
  EXPECT_THAT(index_error(replaced(good, R"("format": "shardwise-checkpoint", )", "")),
              HasSubstr(R"(index.json lacks "format")"));
  EXPECT_THAT(index_error(replaced(good, R"("version": 1)", R"("version": 2)")),
              HasSubstr("index.json has version 2; this shardwise reads version 1"));
  EXPECT_THAT(index_error(replaced(good, R"("version": 1)", R"("version": "1")")),
              HasSubstr(R"(index.json version is "1"; expected a non-negative integer)"));
  EXPECT_THAT(index_error(replaced(good, R"("version": 1)", R"("version": -1)")),
              HasSubstr("index.json version is -1; expected a non-negative integer"));
  EXPECT_THAT(index_error(replaced(good, R"("version": 1, )", "")),
              HasSubstr(R"(index.json lacks "version")"));
  // Unknown fields at every level: a misspelt field is refused, not read as absent.
  EXPECT_THAT(index_error(replaced(good, R"("version": 1,)", R"("version": 1, "extra": 1,)")),
              HasSubstr("index.json has an unknown field 'extra'"));
  EXPECT_THAT(index_error(replaced(good, R"("dtype": "F32",)", R"("dtype": "F32", "dtypes": 1,)")),
              HasSubstr("index.json: array 'w' has an unknown field 'dtypes'"));
  EXPECT_THAT(index_error(replaced(good, R"("offset": 0,)", R"("offset": 0, "crc": 1,)")),
              HasSubstr("index.json: array 'w' shard 0 has an unknown field 'crc'"));
  EXPECT_THAT(index_error(replaced(good, R"({"step": 7})", "[7]")),
              HasSubstr(R"(index.json: "metadata" is not an object)"));
  EXPECT_THAT(index_error(R"({"format": "shardwise-checkpoint", "version": 1, "metadata": {},
                              "arrays": []})"),
              HasSubstr(R"(index.json: "arrays" is not an object)"));
  EXPECT_THAT(index_error(index_of(R"("w": 3)")),
              HasSubstr("index.json: array 'w' is not an object"));
  EXPECT_THAT(index_error(replaced(good, R"("sharding": "rows over data")", R"("sharding": 1)")),
              HasSubstr(R"(index.json: array 'w': "sharding" is not a string)"));
  EXPECT_THAT(index_error(replaced(good, R"(, "crc32c": [1, 2])", "")),
              HasSubstr(R"(index.json: array 'w' shard 0 lacks "crc32c")"));
}

TEST(CheckpointIndex, RefusesBadShapesAndDtypes) {
  const auto with_shape = [](const std::string& shape) {
    return index_error(index_of_w({top_shard(), bottom_shard()}, shape));
  };
  EXPECT_THAT(with_shape("[-2, 2]"),
              HasSubstr("index.json: array 'w' shape is -2; expected a non-negative integer"));
  EXPECT_THAT(with_shape("[1.5, 2]"),
              HasSubstr("index.json: array 'w' shape is 1.5; expected a non-negative integer"));
  EXPECT_THAT(with_shape(R"(["4", 2])"), HasSubstr(R"(shape is "4"; expected a non-negative)"));
  EXPECT_THAT(with_shape("[9223372036854775808, 2]"),
              HasSubstr("index.json: array 'w' shape is 9223372036854775808; at most 2^63 - 1"));
  // 2^64 does not fit an integer: the JSON reader makes it a double, which is not a size.
  const std::string two_to_64 = with_shape("[18446744073709551616, 2]");
  EXPECT_THAT(two_to_64, HasSubstr("index.json: array 'w' shape is "));
  EXPECT_THAT(two_to_64, HasSubstr("; expected a non-negative integer"));
  EXPECT_THAT(with_shape("[1e400, 2]"),
              HasSubstr("invalid JSON in index.json: number overflow parsing '1e400'"));
  EXPECT_THAT(with_shape("[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"),
              HasSubstr(R"(index.json: array 'w': "shape" is not a list of at most 16 sizes)"));
  EXPECT_THAT(with_shape("4"), HasSubstr(R"("shape" is not a list of at most 16 sizes)"));
  EXPECT_THAT(index_error(index_of_w({top_shard(), bottom_shard()}, "[4, 2]", "F8")),
              HasSubstr("index.json: array 'w' has dtype 'F8'; expected F64, F32, BF16"));
  EXPECT_THAT(index_error(replaced(good_index(), R"("dtype": "F32")", R"("dtype": 4)")),
              HasSubstr(R"(index.json: array 'w': "dtype" is not a string)"));
}

// A shape whose element or byte count does not fit in 64 bits is refused, as a CheckpointError
// (checked arithmetic's InvalidArgument converted).
TEST(CheckpointIndex, RefusesShapesBeyond64Bits) {
  EXPECT_THAT(error_message<CheckpointError>([] {
                (void)parse_checkpoint_index(
                    index_of_w({shard("[[0, 4294967296], [0, 4294967296]]", "a", 0, 0, 8, "[]")},
                               "[4294967296, 4294967296]"),
                    "index.json");
              }),
              HasSubstr("array 'w' elements: 4294967296 x 4294967296 does not fit"));
  EXPECT_THAT(error_message<CheckpointError>([] {
                (void)parse_checkpoint_index(
                    index_of_w({shard("[[0, 4611686018427387904]]", "a", 0, 0, 8, "[]")},
                               "[4611686018427387904]"),
                    "index.json");
              }),
              HasSubstr("array 'w' bytes: 4611686018427387904 x 4 does not fit"));
}

TEST(CheckpointIndex, RefusesShardsThatDoNotTileTheArray) {
  // Rows 1:3 in both shards.
  EXPECT_THAT(
      index_error(
          index_of_w({shard("[[0, 3], [0, 2]]", "rank-00000.safetensors", 0, 24, 8, "[1, 2, 3]"),
                      shard("[[1, 4], [0, 2]]", "rank-00001.safetensors", 0, 24, 8, "[1, 2, 3]")})),
      HasSubstr("index.json: array 'w': its shards' ranges along dimension 0 do not split 0:4 "
                "into consecutive parts (1:4 after 3)"));
  // Row 1 in neither.
  EXPECT_THAT(index_error(index_of_w(
                  {shard("[[0, 1], [0, 2]]", "rank-00000.safetensors", 0, 8, 8, "[1]"),
                   shard("[[2, 4], [0, 2]]", "rank-00001.safetensors", 0, 16, 8, "[1, 2]")})),
              HasSubstr("along dimension 0 do not split 0:4 into consecutive parts (2:4 after 1)"));
  // Rows 2:4 in neither.
  EXPECT_THAT(index_error(index_of_w({top_shard()})),
              HasSubstr("index.json: array 'w': its shards cover dimension 0 up to 2 of 4"));
  // Columns split in the top half only: every range partitions its dimension, but the bottom
  // right block has no shard.
  EXPECT_THAT(index_error(index_of_w(
                  {shard("[[0, 2], [0, 1]]", "rank-00000.safetensors", 0, 8, 8, "[1]"),
                   shard("[[0, 2], [1, 2]]", "rank-00001.safetensors", 0, 8, 8, "[1]"),
                   shard("[[2, 4], [0, 1]]", "rank-00002.safetensors", 0, 8, 8, "[1]")})),
              HasSubstr("index.json: array 'w' has 3 shards where its ranges make a grid of 4: "
                        "they do not tile it"));
  // The same shard twice, from two files.
  EXPECT_THAT(index_error(index_of_w(
                  {top_shard(), bottom_shard(),
                   shard("[[0, 2], [0, 2]]", "rank-00002.safetensors", 0, 16, 8, "[1, 2]")})),
              HasSubstr("index.json: array 'w' has the shard [0:2,0:2] twice"));
  EXPECT_THAT(index_error(index_of_w({})), HasSubstr("index.json: array 'w' has no shards"));
  // A box outside the shape, reversed, with a negative start, or of the wrong rank.
  EXPECT_THAT(
      index_error(index_of_w({top_shard(), shard("[[2, 4], [0, 3]]", "rank-00001.safetensors", 0,
                                                 24, 8, "[3, 4, 5]")})),
      HasSubstr("index.json: array 'w' shard [2:4,0:3] lies outside the array's shape "
                "(4, 2)"));
  EXPECT_THAT(
      index_error(index_of_w(
          {top_shard(), shard("[[4, 2], [0, 2]]", "rank-00001.safetensors", 0, 16, 8, "[3, 4]")})),
      HasSubstr("shard [4:2,0:2] lies outside the array's shape (4, 2)"));
  EXPECT_THAT(index_error(replaced(good_index(), "[[0, 2], [0, 2]]", "[[-1, 2], [0, 2]]")),
              HasSubstr("index.json: array 'w' shard 0 box start is -1; expected a non-negative "
                        "integer"));
  EXPECT_THAT(index_error(replaced(good_index(), "[[0, 2], [0, 2]]", "[[0, 4]]")),
              HasSubstr(R"(index.json: array 'w' shard 0: "box" is not a list of 2 [start, stop] )"
                        "ranges"));
  EXPECT_THAT(index_error(replaced(good_index(), "[[0, 2], [0, 2]]", "[[0, 2], [0, 2], [0, 1]]")),
              HasSubstr(R"(shard 0: "box" is not a list of 2 [start, stop] ranges)"));
  EXPECT_THAT(index_error(replaced(good_index(), "[[0, 2], [0, 2]]", "[[0, 2], [0, 2, 3]]")),
              HasSubstr(R"(index.json: array 'w' shard 0: a range of "box" is not [start, stop])"));
}

TEST(CheckpointIndex, RefusesShardBytesThatDisagree) {
  // A length that is not the box's bytes.
  EXPECT_THAT(index_error(replaced(good_index(), R"("length": 16)", R"("length": 15)")),
              HasSubstr("index.json: array 'w' shard [0:2,0:2] has length 15; its box holds 16 "
                        "bytes of f32"));
  // Lengths written for f32 under a dtype of f16.
  EXPECT_THAT(index_error(index_of_w({top_shard(), bottom_shard()}, "[4, 2]", "F16")),
              HasSubstr("shard [0:2,0:2] has length 16; its box holds 8 bytes of f16"));
  // Two shards on bytes 8:16 of one file.
  EXPECT_THAT(
      index_error(index_of_w(
          {top_shard(), shard("[[2, 4], [0, 2]]", "rank-00000.safetensors", 8, 16, 8, "[3, 4]")})),
      HasSubstr("index.json: array 'w' shard [0:2,0:2] and index.json: array 'w' shard "
                "[2:4,0:2] share bytes of the file 'rank-00000.safetensors'"));
  // Across arrays too.
  EXPECT_THAT(index_error(index_of(
                  R"("a": )" +
                  array_entry("[2]", "F64",
                              {shard("[[0, 2]]", "rank-00001.safetensors", 15, 16, 16, "[0]")}) +
                  R"(, "w": )" + array_entry("[4, 2]", "F32", {top_shard(), bottom_shard()}))),
              HasSubstr("share bytes of the file 'rank-00001.safetensors'"));
  EXPECT_THAT(
      index_error(replaced(good_index(), R"("offset": 0,)", R"("offset": 18446744073709551615,)")),
      HasSubstr("index.json: array 'w' shard [0:2,0:2] has offset 18446744073709551615 + "
                "length past 2^64"));
  // Checksums: one per chunk of chunk_bytes, each below 2^32, none without a chunk size.
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1]")),
              HasSubstr("index.json: array 'w' shard [0:2,0:2] has 1 checksums for 2 chunks of 8 "
                        "bytes"));
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1, 2, 3]")),
              HasSubstr("shard [0:2,0:2] has 3 checksums for 2 chunks of 8 bytes"));
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1, 4294967296]")),
              HasSubstr("index.json: array 'w' shard 0 has a crc32c above 2^32"));
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1, 18446744073709551615]")),
              HasSubstr("shard 0 has a crc32c above 2^32"));
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1, -2]")),
              HasSubstr("index.json: array 'w' shard 0 crc32c is -2; expected a non-negative "
                        "integer"));
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", "[1, 2.5]")),
              HasSubstr("shard 0 crc32c is 2.5; expected a non-negative integer"));
  EXPECT_THAT(index_error(replaced(good_index(), R"("chunk_bytes": 8, "crc32c": [1, 2])",
                                   R"("chunk_bytes": 0, "crc32c": [1])")),
              HasSubstr("index.json: array 'w' shard 0 has chunk_bytes 0 (no checksums); every "
                        "shard of a checkpoint has them"));
  EXPECT_THAT(index_error(replaced(good_index(), R"("length": 16)", R"("length": 1.6e1)")),
              HasSubstr("shard 0 length is 16.0; expected a non-negative integer"));
}

TEST(CheckpointIndex, RefusesFileNamesOutsideTheFolder) {
  const auto with_file = [](const std::string& file) {
    return index_error(
        index_of_w({shard("[[0, 2], [0, 2]]", file, 0, 16, 8, "[1, 2]"), bottom_shard()}));
  };
  for (const std::string file : {"../x", "a/b", "", ".", "..", "/etc/passwd", "x/"}) {
    EXPECT_THAT(with_file(file),
                HasSubstr("index.json: array 'w' shard [0:2,0:2] names the file '" + file +
                          "'; expected a plain file name of the checkpoint's "
                          "folder"))
        << file;
  }
  // A NUL would end the name the system opens: "a\0b" would read "a".
  EXPECT_THAT(with_file(R"(a\u0000b)"), HasSubstr(R"(names the file 'a\x00b')"));
  EXPECT_THAT(with_file(std::string(256, 'x')), HasSubstr("expected a plain file name"));
  EXPECT_NO_THROW((void)parse_checkpoint_index(
      index_of_w(
          {shard("[[0, 2], [0, 2]]", std::string(255, 'x'), 0, 16, 8, "[1, 2]"), bottom_shard()}),
      "index.json"));
}

TEST(CheckpointIndex, RefusesHugeListsBeforeStoringThem) {
  // A million checksums for a 16-byte shard: refused from the list's size, before any is read.
  std::string crcs = "[0";
  for (int i = 1; i < 1'000'000; ++i) crcs += ",0";
  crcs += "]";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(index_error(replaced(good_index(), "[1, 2]", crcs)),
              HasSubstr("index.json: array 'w' shard 0 has 1000000 checksums; its length and "
                        "chunk size allow at most 3"));
  // Parsing 2 MB of JSON takes well under a second even in a sanitizer build; what is guarded
  // against is work per checksum beyond that (a quadratic check would take minutes).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // A million and one shards (their contents never looked at).
  std::string shards = "[0";
  for (std::size_t i = 1; i <= kMaxShardsPerArray; ++i) shards += ",0";
  shards += "]";
  EXPECT_THAT(index_error(R"({"format": "shardwise-checkpoint", "version": 1, "metadata": {},
                              "arrays": {"w": {"shape": [4], "dtype": "F32", "sharding": "",
                              "shards": )" +
                          shards + "}}}"),
              HasSubstr(R"(index.json: array 'w': "shards" is not a list of at most 1000000)"));
}

TEST(CheckpointIndex, ChecksTenThousandShardsOfOneFile) {
  // One i8 element a shard, listed last to first, at consecutive bytes of one file: the grid and
  // byte-range checks sort rather than compare every pair.
  constexpr int kShards = 10'000;
  // Shard `clash` is placed on the byte before its own (kNone: no shard is).
  constexpr std::uint64_t kNone = UINT64_MAX;
  const auto index_text = [](std::uint64_t clash) {
    std::vector<std::string> shards;
    for (int i = kShards - 1; i >= 0; --i) {
      const auto at = static_cast<std::uint64_t>(i);
      shards.push_back(shard("[[" + std::to_string(i) + ", " + std::to_string(i + 1) + "]]",
                             "rank-00000.safetensors", at == clash ? at - 1 : at, 1, 1, "[7]"));
    }
    return index_of_w(shards, "[" + std::to_string(kShards) + "]", "I8");
  };
  const CheckpointIndex index = parse_checkpoint_index(index_text(kNone), "index.json");
  ASSERT_EQ(index.arrays.size(), 1U);
  EXPECT_EQ(index.arrays[0].shards.size(), static_cast<std::size_t>(kShards));
  EXPECT_EQ(index.total_bytes(), static_cast<std::uint64_t>(kShards));
  // Shard 5000 placed on shard 4999's byte.
  EXPECT_THAT(index_error(index_text(5000)),
              HasSubstr("shard [4999:5000] and index.json: array 'w' shard [5000:5001] share "
                        "bytes of the file 'rank-00000.safetensors'"));
}

TEST(CheckpointIndex, CheckConsistentRefusesIndexesMadeInMemory) {
  const auto consistency_error = [](const CheckpointIndex& index) {
    return error_message<CheckpointError>([&] { check_consistent(index, "memory"); });
  };
  CheckpointIndex index = memory_index();
  index.arrays[1].shards[1].chunk_bytes = 0;  // an index made in memory may have none
  index.arrays[1].shards[1].crc32c = {5};
  EXPECT_THAT(consistency_error(index),
              HasSubstr("memory: array 'weight' shard [2:4,0:2] has checksums but no chunk size"));
  index = memory_index();
  std::swap(index.arrays[0], index.arrays[1]);
  EXPECT_THAT(consistency_error(index),
              HasSubstr("memory: array 'bias' is listed twice or out of order"));
  index = memory_index();
  index.arrays[1].name = "bias";
  EXPECT_THAT(consistency_error(index),
              HasSubstr("memory: array 'bias' is listed twice or out of order"));
  index = memory_index();
  index.arrays[0].name = "";
  EXPECT_THAT(consistency_error(index), HasSubstr("memory: an array has an empty name"));
  index = memory_index();
  index.arrays[0].shards[0].box = {{0, 4}, {0, 1}};
  EXPECT_THAT(consistency_error(index),
              HasSubstr("memory: array 'bias' shard [0:4,0:1] has 2 ranges for a shape of 1 "
                        "dimensions"));
  index = memory_index();
  index.arrays[1].shape = {-4, 2};
  EXPECT_THAT(consistency_error(index), HasSubstr("memory: array 'weight' has a negative size"));
  index = memory_index();
  index.arrays[1].shape = Shape(17, 1);
  EXPECT_THAT(consistency_error(index),
              HasSubstr("memory: array 'weight' has more than 16 dimensions"));
}

// --- parse_safetensors_header ---------------------------------------------------------------

TEST(SafetensorsHeader, ParsesAWellFormedHeader) {
  // Padded with spaces to 8 bytes, as writers do; an empty tensor inside another's bytes (it
  // holds none of them) and a scalar.
  const SafetensorsHeader header = parse_safetensors_header(
      R"({"__metadata__": {"format": "pt", "note": ""},
          "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]},
          "c": {"dtype": "F32", "shape": [0, 4], "data_offsets": [4, 4]},
          "d": {"dtype": "BOOL", "shape": [], "data_offsets": [22, 23]}}     )",
      24);
  ASSERT_EQ(header.tensors.size(), 4U);
  EXPECT_EQ(header.tensors[0].name, "a");
  EXPECT_EQ(header.tensors[0].dtype, DType::kF32);
  EXPECT_EQ(header.tensors[0].shape, (Shape{2, 2}));
  EXPECT_EQ(header.tensors[0].begin, 0U);
  EXPECT_EQ(header.tensors[0].end, 16U);
  EXPECT_EQ(header.tensors[1].name, "b");
  EXPECT_EQ(header.tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(header.tensors[1].begin, 16U);
  EXPECT_EQ(header.tensors[1].end, 22U);
  EXPECT_EQ(header.tensors[2].shape, (Shape{0, 4}));
  EXPECT_EQ(header.tensors[2].begin, header.tensors[2].end);
  EXPECT_EQ(header.tensors[3].dtype, DType::kBool);
  EXPECT_TRUE(header.tensors[3].shape.empty());
  using Pair = std::pair<std::string, std::string>;
  EXPECT_EQ(header.metadata, (std::vector<Pair>{{"format", "pt"}, {"note", ""}}));
}

TEST(SafetensorsHeader, RefusesHostileHeaders) {
  const auto tensor = [](const std::string& name, const std::string& dtype,
                         const std::string& shape, const std::string& offsets) {
    return R"(")" + name + R"(": {"dtype": ")" + dtype + R"(", "shape": )" + shape +
           R"(, "data_offsets": )" + offsets + "}";
  };
  const auto w = [&](const std::string& shape, const std::string& offsets) {
    return "{" + tensor("w", "F32", shape, offsets) + "}";
  };
  EXPECT_NO_THROW((void)parse_safetensors_header(w("[2]", "[0, 8]"), 1024));
  EXPECT_THAT(header_error("not json"), HasSubstr("invalid JSON in the safetensors header"));
  EXPECT_THAT(header_error("[]"), HasSubstr("the safetensors header is not a JSON object"));
  EXPECT_THAT(header_error("{\"w\xff\": 1}"), HasSubstr("ill-formed UTF-8"));
  EXPECT_THAT(header_error("{}"), HasSubstr("the safetensors header lists no tensors"));
  EXPECT_THAT(header_error(R"({"__metadata__": {"format": "pt"}})"),
              HasSubstr("the safetensors header lists no tensors"));
  EXPECT_THAT(header_error("{" + tensor("w", "F32", "[2]", "[0, 8]") + ", " +
                           tensor("w", "F32", "[2]", "[8, 16]") + "}"),
              HasSubstr(R"(the safetensors header has the key "w" twice in one object)"));
  EXPECT_THAT(header_error("{" + tensor("a", "F32", "[2]", "[0, 8]") + ", " +
                           tensor("b", "F32", "[2]", "[4, 12]") + "}"),
              HasSubstr("safetensors tensors 'a' [0, 8) and 'b' [4, 12) overlap"));
  // Two tensors on the very same bytes.
  EXPECT_THAT(header_error("{" + tensor("a", "F32", "[2]", "[0, 8]") + ", " +
                           tensor("b", "I64", "[]", "[0, 8]") + "}"),
              HasSubstr("safetensors tensors 'a' [0, 8) and 'b' [0, 8) overlap"));
  EXPECT_THAT(header_error(w("[512]", "[0, 2048]")),
              HasSubstr("safetensors tensor 'w' has data_offsets [0, 2048]; its shape needs 2048 "
                        "bytes inside the file's 1024 data bytes"));
  EXPECT_THAT(header_error(w("[2]", "[8, 0]")), HasSubstr("has data_offsets [8, 0]"));
  EXPECT_THAT(header_error(w("[2]", "[0, 18446744073709551615]")),
              HasSubstr("has data_offsets [0, 18446744073709551615]; its shape needs 8 bytes"));
  // 2^64 + 7 does not fit an integer: the JSON reader makes it a double, which is no offset.
  EXPECT_THAT(header_error(w("[2]", "[18446744073709551615, 18446744073709551623]")),
              HasSubstr("safetensors tensor 'w' data_offsets end is "));
  EXPECT_THAT(header_error(w("[3]", "[0, 8]")),
              HasSubstr("has data_offsets [0, 8]; its shape needs 12 bytes"));
  EXPECT_THAT(header_error("{" + tensor("w", "F8", "[2]", "[0, 2]") + "}"),
              HasSubstr("safetensors tensor 'w' has dtype 'F8'; expected F64, F32, BF16"));
  EXPECT_THAT(header_error(R"({"w": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})"),
              HasSubstr(R"(safetensors tensor 'w': "dtype" is not a string)"));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8],
                                     "x": 1}})"),
              HasSubstr(R"(safetensors tensor 'w' needs exactly "dtype", "shape" and )"
                        R"("data_offsets")"));
  EXPECT_THAT(header_error(R"({"w": {"dtype": "F32", "shape": [2]}})"),
              HasSubstr("safetensors tensor 'w' needs exactly"));
  EXPECT_THAT(header_error(R"({"w": [1, 2, 3]})"),
              HasSubstr("safetensors tensor 'w' needs exactly"));
  EXPECT_THAT(header_error(w("[-1]", "[0, 0]")),
              HasSubstr("safetensors tensor 'w' shape entry is -1; expected a non-negative "
                        "integer"));
  EXPECT_THAT(header_error(w("[1.5]", "[0, 6]")),
              HasSubstr("safetensors tensor 'w' shape entry is 1.5; expected"));
  EXPECT_THAT(header_error(w("[9223372036854775808]", "[0, 0]")),
              HasSubstr("safetensors tensor 'w' shape entry 9223372036854775808 is too large"));
  EXPECT_THAT(header_error(w("[1e400]", "[0, 0]")),
              HasSubstr("invalid JSON in the safetensors header: number overflow parsing "
                        "'1e400'"));
  EXPECT_THAT(header_error(w("2", "[0, 8]")),
              HasSubstr(R"(safetensors tensor 'w': "shape" is not a list of at most 16 sizes)"));
  EXPECT_THAT(header_error(w("[2]", "[0]")),
              HasSubstr(R"(safetensors tensor 'w': "data_offsets" is not [begin, end])"));
  EXPECT_THAT(header_error(w("[2]", "[-8, 0]")),
              HasSubstr("safetensors tensor 'w' data_offsets begin is -8; expected a "
                        "non-negative integer"));
  EXPECT_THAT(header_error(R"({"__metadata__": {"format": 1},)" +
                           tensor("w", "F32", "[2]", "[0, 8]") + "}"),
              HasSubstr("safetensors __metadata__ 'format' is not a string"));
  EXPECT_THAT(header_error(R"({"__metadata__": {"format": {"nested": "pt"}},)" +
                           tensor("w", "F32", "[2]", "[0, 8]") + "}"),
              HasSubstr("safetensors __metadata__ 'format' is not a string"));
  EXPECT_THAT(header_error(R"({"__metadata__": "pt",)" + tensor("w", "F32", "[2]", "[0, 8]") + "}"),
              HasSubstr("the safetensors __metadata__ is not an object"));
  // Past safetensors' own bound on a header, refused from its size alone.
  EXPECT_THAT(header_error(std::string(kMaxSafetensorsHeaderBytes + 1, ' ')),
              HasSubstr("the safetensors header has 100000001 bytes; at most 100000000"));
}

// As for the index: a ParseError (from_safetensors turns it into a CheckpointError).
TEST(SafetensorsHeader, RefusesElementCountsBeyond64Bits) {
  EXPECT_THAT(error_message<ParseError>([] {
                (void)parse_safetensors_header(
                    R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                              "data_offsets": [0, 0]}})",
                    1024);
              }),
              HasSubstr("safetensors tensor 'w' elements: 4294967296 x 4294967296 does not fit"));
  EXPECT_THAT(error_message<ParseError>([] {
                (void)parse_safetensors_header(
                    R"({"w": {"dtype": "F32", "shape": [4611686018427387904],
                              "data_offsets": [0, 0]}})",
                    1024);
              }),
              HasSubstr("safetensors tensor 'w' bytes: 4611686018427387904 x 4 does not fit"));
}

// --- CheckpointReader::from_safetensors -----------------------------------------------------

class FromSafetensors : public ::testing::Test {
 protected:
  // A folder of this test's own (tests run as processes of their own, in parallel).
  void SetUp() override {
    folder_ = std::filesystem::path(::testing::TempDir()) /
              ("shardwise_checkpoint_index_test_" +
               std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
               std::to_string(::getpid()));
    std::filesystem::remove_all(folder_);
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }

  std::filesystem::path write(const std::string& name, const std::string& bytes) {
    const std::filesystem::path path = folder_ / name;
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  // The 8-byte little-endian length a .safetensors file starts with.
  static std::string length_prefix(std::uint64_t length) {
    std::string prefix(8, '\0');
    for (std::size_t b = 0; b < 8; ++b) prefix[b] = static_cast<char>((length >> (8 * b)) & 0xff);
    return prefix;
  }

  // A .safetensors file: the header, then `data` bytes 0, 1, 2, ... (mod 256).
  std::filesystem::path write_safetensors(const std::string& name, const std::string& header,
                                          std::size_t data) {
    std::string bytes = length_prefix(header.size()) + header;
    for (std::size_t i = 0; i < data; ++i) bytes += static_cast<char>(i & 0xff);
    return write(name, bytes);
  }

  static std::string reader_error(const std::filesystem::path& path) {
    return error_message<CheckpointError>([&] { (void)CheckpointReader::from_safetensors(path); });
  }

  std::filesystem::path folder_;
};

TEST_F(FromSafetensors, ReadsAFileAsACheckpointOfWholeArrays) {
  const std::string header =
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}})";
  const std::filesystem::path path = write_safetensors("model.safetensors", header, 16);
  const CheckpointReader reader = CheckpointReader::from_safetensors(path);
  EXPECT_EQ(reader.folder().string(), folder_.string());
  const CheckpointIndex& index = reader.index();
  EXPECT_EQ(index.metadata_json, R"({"safetensors_metadata":{"format":"pt"}})");
  ASSERT_EQ(index.arrays.size(), 2U);
  const ArrayRecord& a = index.arrays[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.shape, (Shape{2, 2}));
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.sharding, "whole");
  ASSERT_EQ(a.shards.size(), 1U);
  EXPECT_EQ(a.shards[0].box, (ShardIndex{{0, 2}, {0, 2}}));
  EXPECT_EQ(a.shards[0].file, "model.safetensors");
  EXPECT_EQ(a.shards[0].offset, 8 + header.size() + 8);
  EXPECT_EQ(a.shards[0].length, 8U);
  EXPECT_EQ(a.shards[0].chunk_bytes, 0U);
  EXPECT_TRUE(a.shards[0].crc32c.empty());
  EXPECT_EQ(index.arrays[1].name, "b");
  EXPECT_EQ(index.arrays[1].shards[0].offset, 8 + header.size());
  // The bytes come from where the header says: "b" is data bytes 0 to 7.
  std::vector<std::byte> bytes(8);
  BlockToLoad target;
  target.array = "b";
  target.shape = {2};
  target.dtype = DType::kF32;
  target.box = {{0, 2}};
  target.bytes = bytes;
  const ReadStats stats = reader.read(std::span<const BlockToLoad>(&target, 1));
  EXPECT_EQ(stats.bytes_needed, 8U);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    EXPECT_EQ(bytes[i], static_cast<std::byte>(i)) << i;
}

TEST_F(FromSafetensors, RefusesHeaderLengthsTheFileCannotHold) {
  // 2^63 and 2^64 - 1: refused from the prefix, before a string of that size is asked for.
  EXPECT_THAT(reader_error(write("a.safetensors", length_prefix(std::uint64_t{1} << 63) + "{}")),
              HasSubstr("a.safetensors' says its safetensors header has 9223372036854775808 bytes; "
                        "the file has 2 after the length"));
  EXPECT_THAT(reader_error(write("b.safetensors", length_prefix(UINT64_MAX) + "{}")),
              HasSubstr("says its safetensors header has 18446744073709551615 bytes"));
  EXPECT_THAT(reader_error(write("c.safetensors", length_prefix(100) + "{\"w\": 1}  ")),
              HasSubstr("c.safetensors' says its safetensors header has 100 bytes; the file has "
                        "10 after the length"));
  // 200 MB in a (sparse) file of 200 MB: the file could hold it, safetensors' bound cannot.
  const std::filesystem::path big = write("big.safetensors", length_prefix(200'000'000));
  std::filesystem::resize_file(big, 8 + 200'000'000);
  EXPECT_THAT(reader_error(big),
              HasSubstr("says its safetensors header has 200000000 bytes; the file has 200000000 "
                        "after the length and a header may have at most 100000000"));
  // Shorter than the length itself.
  EXPECT_THAT(reader_error(write("short.safetensors", std::string("\x08\x00\x00\x00\x00", 5))),
              HasSubstr("short.safetensors' has 5 bytes: no safetensors header"));
  EXPECT_THAT(reader_error(write("empty.safetensors", "")),
              HasSubstr("empty.safetensors' has 0 bytes: no safetensors header"));
}

TEST_F(FromSafetensors, RefusesWhatIsNotARegularFile) {
  EXPECT_THAT(reader_error(folder_), HasSubstr("' is not a regular file"));
  if (std::filesystem::exists("/dev/zero")) {
    // Endless zeros: a header length of 0, then reading forever, were it read.
    EXPECT_THAT(reader_error("/dev/zero"), HasSubstr("'/dev/zero' is not a regular file"));
  }
  EXPECT_THAT(reader_error(folder_ / "missing.safetensors"), HasSubstr("cannot open '"));
  EXPECT_THAT(reader_error(folder_ / "missing.safetensors"),
              HasSubstr("missing.safetensors': No such file or directory"));
}

TEST_F(FromSafetensors, RefusesBadHeadersAsCheckpointErrors) {
  EXPECT_THAT(reader_error(write_safetensors("a.safetensors", "{}", 0)),
              HasSubstr("a.safetensors': the safetensors header lists no tensors"));
  EXPECT_THAT(reader_error(write_safetensors("b.safetensors", "{not json", 0)),
              HasSubstr("b.safetensors': invalid JSON in the safetensors header"));
  EXPECT_THAT(
      reader_error(write_safetensors(
          "c.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4)),
      HasSubstr("c.safetensors': safetensors tensor 'w' has data_offsets [0, 8]; its shape needs "
                "8 bytes inside the file's 4 data bytes"));
  // A name the index cannot hold.
  EXPECT_THAT(
      reader_error(write_safetensors(
          "d.safetensors", R"({"": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8)),
      HasSubstr("d.safetensors': an array has an empty name"));
  // An element count beyond 64 bits reaches the caller as a CheckpointError like the rest.
  EXPECT_THAT(
      reader_error(write_safetensors("e.safetensors",
                                     R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                            "data_offsets": [0, 0]}})",
                                     0)),
      HasSubstr("e.safetensors': safetensors tensor 'w' elements:"));
}

}  // namespace
}  // namespace shardwise::ckpt

namespace shardwise::ckpt {
namespace {

// 100000 levels of brackets would overflow the stack of the JSON library's recursive dump and
// destructor: refused while parsing.
TEST(CheckpointIndex, RefusesDeeplyNestedJson) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    (void)parse_checkpoint_index(R"({"format": )" + deep + "}", "index.json");
    FAIL() << "a 100000-level document was read";
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nests deeper than 256 levels"));
  }
  EXPECT_THROW((void)parse_safetensors_header(R"({"w": {"shape": )" + deep + "}}", 16), ParseError);
}

// A FIFO where a checkpoint file should be is refused at once, not waited on for a writer.
TEST(CheckpointIndex, AFifoIsNotAFileToWaitOn) {
  const std::filesystem::path folder =
      std::filesystem::path(::testing::TempDir()) / "shardwise_fifo_checkpoint";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  ASSERT_EQ(::mkfifo((folder / "model.safetensors").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((folder / "index.json").c_str(), 0600), 0);
  try {
    (void)CheckpointReader::from_safetensors(folder / "model.safetensors");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("is not a regular file"));
  }
  EXPECT_THROW((void)CheckpointReader(folder), CheckpointError);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace shardwise::ckpt
