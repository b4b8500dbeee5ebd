// Run logs: the event file read back record by record with a reader of this test's own (TFRecord
// framing, masked CRC-32C computed bit by bit, protocol buffers decoded by hand), its numbers
// equal to metrics.jsonl's; a folder holding a run's logs refused untouched; a full disk named.
#include "shardwise/train/run_log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "error_of.hpp"

namespace shardwise::train {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// CRC-32C one bit at a time, as its definition reads (not the library's table).
std::uint32_t crc32c_bitwise(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFFU;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1U)));
  }
  return ~crc;
}

std::uint32_t masked(std::string_view data) {
  const std::uint32_t crc = crc32c_bitwise(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

std::uint64_t little_endian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (std::size_t b = bytes.size(); b-- > 0;) {
    value = value << 8 | static_cast<unsigned char>(bytes[b]);
  }
  return value;
}

// Every record of a TFRecord file, each checked against both its checksums.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "a record's header is cut at byte " << at;
    const std::string_view length_bytes(file.data() + at, 8);
    const std::uint64_t length = little_endian(length_bytes);
    EXPECT_EQ(little_endian(std::string_view(file.data() + at + 8, 4)), masked(length_bytes));
    EXPECT_LE(at + 12 + length + 4, file.size()) << "a record is cut at byte " << at;
    const std::string_view data(file.data() + at + 12, length);
    EXPECT_EQ(little_endian(std::string_view(file.data() + at + 12 + length, 4)), masked(data));
    records.emplace_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// A protocol buffer message's fields: number -> every value's bytes (varints decoded into the
// value's 8 bytes, fixed-width and length-delimited fields as they are).
struct Field {
  int wire_type;
  std::string bytes;
  std::uint64_t varint = 0;
};

std::multimap<int, Field> decode(std::string_view message) {
  std::multimap<int, Field> fields;
  std::size_t at = 0;
  const auto varint = [&] {
    std::uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      const auto byte = static_cast<unsigned char>(message.at(at++));
      value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
  };
  while (at < message.size()) {
    const std::uint64_t key = varint();
    const int wire = static_cast<int>(key & 7);
    Field field{wire, {}};
    if (wire == 0) {
      field.varint = varint();
    } else if (wire == 1 || wire == 5) {
      const std::size_t n = wire == 1 ? 8 : 4;
      field.bytes = std::string(message.substr(at, n));
      at += n;
    } else {
      EXPECT_EQ(wire, 2);
      const std::uint64_t n = varint();
      field.bytes = std::string(message.substr(at, n));
      at += n;
    }
    fields.emplace(static_cast<int>(key >> 3), field);
  }
  return fields;
}

template <typename T>
T as(const std::string& bytes) {
  T value{};
  EXPECT_EQ(bytes.size(), sizeof value);
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

struct Scalars {
  std::int64_t step;
  double wall_time;
  std::vector<std::pair<std::string, float>> values;
};

// The events after the version record, as (step, wall time, tag -> value).
std::vector<Scalars> read_events(const std::string& path) {
  const std::vector<std::string> records = read_records(path);
  EXPECT_FALSE(records.empty());
  std::vector<Scalars> out;
  for (std::size_t r = 0; r < records.size(); ++r) {
    const auto event = decode(records[r]);
    if (r == 0) {
      EXPECT_EQ(event.find(3)->second.bytes, "brain.Event:2");  // file_version
      EXPECT_GT(as<double>(event.find(1)->second.bytes), 1.6e9);
      continue;
    }
    Scalars scalars{static_cast<std::int64_t>(event.find(2)->second.varint),
                    as<double>(event.find(1)->second.bytes),
                    {}};
    const auto summary = decode(event.find(5)->second.bytes);
    for (auto [it, end] = summary.equal_range(1); it != end; ++it) {
      const auto value = decode(it->second.bytes);
      scalars.values.emplace_back(value.find(1)->second.bytes,
                                  as<float>(value.find(2)->second.bytes));
    }
    out.push_back(scalars);
  }
  return out;
}

std::string fresh_folder(const std::string& name) {
  const std::string path = ::testing::TempDir() + "run_log_" + name;
  fs::remove_all(path);
  return path;
}

TEST(RunLog, TheChecksumIsCrc32c) {
  // The check value of CRC-32C (Castagnoli) and TFRecord's mask of it.
  EXPECT_EQ(crc32c_bitwise("123456789"), 0xE3069283U);
  EXPECT_EQ(masked(""), 0xA282EAD8U);
}

TEST(RunLog, EventFileAndJsonLinesHoldTheSameNumbers) {
  const std::string folder = fresh_folder("same") + "/nested/run";
  {
    RunLog log(folder, R"({"settings": {"steps": 3}})");
    log.record(
        1,
        {{"train/loss", 5.5631594}, {"train/learning_rate", 3e-3}, {"perf/tokens_per_s", 18234.7}});
    log.record(2, {{"train/loss", std::nan("")},
                   {"train/grad_norm", 1e300},
                   {"memory/rank_0_bytes", 123456789012.0}});
    log.record(3000000000LL, {{"val/loss", -0.0}});
  }
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(folder + "/config.json"))["settings"]["steps"], 3);
  std::vector<std::string> event_files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      event_files.push_back(entry.path().string());
    }
  }
  ASSERT_EQ(event_files.size(), 1U);
  const std::vector<Scalars> events = read_events(event_files[0]);
  std::ifstream lines(folder + "/metrics.jsonl");
  std::vector<nlohmann::json> json;
  for (std::string line; std::getline(lines, line);) json.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(events.size(), 3U);
  ASSERT_EQ(json.size(), 3U);
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(json[i]["step"].get<std::int64_t>(), events[i].step);
    EXPECT_EQ(json[i]["wall_time"].get<double>(), events[i].wall_time);
    ASSERT_EQ(json[i].size(), events[i].values.size() + 2);
    for (const auto& [tag, value] : events[i].values) {
      if (std::isfinite(value)) {
        EXPECT_EQ(static_cast<float>(json[i][tag].get<double>()), value) << tag;
      } else {
        EXPECT_TRUE(json[i][tag].is_null()) << tag;
      }
    }
  }
  EXPECT_EQ(events[0].values[0], (std::pair<std::string, float>{"train/loss", 5.5631594F}));
  EXPECT_TRUE(std::isnan(events[1].values[0].second));
  EXPECT_EQ(events[1].values[1].second, std::numeric_limits<float>::infinity());
  EXPECT_EQ(events[1].values[2].second, 123456789012.0F);
  EXPECT_EQ(events[2].step, 3000000000LL);
}

TEST(RunLog, AFolderHoldingARunIsRefusedUntouched) {
  const std::string folder = fresh_folder("twice");
  { RunLog first(folder, "{}"); }
  const auto before = std::distance(fs::directory_iterator(folder), fs::directory_iterator());
  EXPECT_THAT(error_of([&] { RunLog second(folder, R"({"other": 1})"); }),
              HasSubstr("--log-dir '" + folder + "' already holds a run's logs ('" + folder +
                        "/config.json'); choose another folder or remove it"));
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), before);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(folder + "/config.json")),
            nlohmann::json::object());
  const std::string file = fresh_folder("file");
  std::ofstream(file) << "not a folder";
  EXPECT_THAT(error_of([&] { RunLog log(file, "{}"); }),
              HasSubstr("--log-dir '" + file + "' is not a folder"));
  EXPECT_THAT(error_of([&] { RunLog log(file + "/below", "{}"); }),
              HasSubstr("is not a folder and cannot be made one"));
}

// A disk that fills (a file-size limit, which the kernel enforces like a full disk): the write
// that cannot complete names the file.
TEST(RunLog, AFullDiskIsNamed) {
  const std::string folder = fresh_folder("full");
  RunLog log(folder, "{}");
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = error_of([&] {
    for (int step = 1; step < 1000; ++step) log.record(step, {{"train/loss", 1.0}});
  });
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_THAT(message, ::testing::MatchesRegex("cannot write (the event file )?'" + folder +
                                               "/.*': File too large"));
}

}  // namespace
}  // namespace shardwise::train
