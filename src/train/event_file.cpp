#include "shardwise/train/event_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "detail/crc32c.hpp"
#include "detail/write_all.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

// Protocol buffer encoding, the few wire types an Event needs.
void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_fixed(std::string& out, std::uint64_t bits, int bytes) {
  for (int b = 0; b < bytes; ++b) out.push_back(static_cast<char>((bits >> (8 * b)) & 0xFF));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_double(std::string& out, int field, double value) {
  put_tag(out, field, 1);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_fixed(out, bits, 8);
}

void put_float(std::string& out, int field, float value) {
  put_tag(out, field, 5);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_fixed(out, bits, 4);
}

// tensorflow.Event's fields: wall_time 1, step 2, file_version 3, summary 5;
// Summary.value 1; Summary.Value's tag 1, simple_value 2.
constexpr int kWallTime = 1;
constexpr int kStep = 2;
constexpr int kFileVersion = 3;
constexpr int kSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kSimpleValue = 2;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& directory) {
  const double now = now_seconds();
  path_ = directory + "/events.out.tfevents." + std::to_string(static_cast<std::int64_t>(now)) +
          "." + host_name() + "." + std::to_string(::getpid());
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw InvalidArgument("cannot create the event file '" + path_ + "': " + std::strerror(errno));
  }
  std::string event;
  put_double(event, kWallTime, now);
  put_bytes(event, kFileVersion, "brain.Event:2");
  write_record(event);
}

EventFileWriter::~EventFileWriter() { ::close(fd_); }

void EventFileWriter::add_scalars(std::int64_t step, double wall_time,
                                  const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, kValueTag, tag);
    put_float(entry, kSimpleValue, value);
    put_bytes(summary, kSummaryValue, entry);
  }
  std::string event;
  put_double(event, kWallTime, wall_time);
  put_tag(event, kStep, 0);
  put_varint(event, static_cast<std::uint64_t>(step));
  put_bytes(event, kSummary, summary);
  write_record(event);
}

void EventFileWriter::write_record(std::string_view data) {
  std::string record;
  std::string length;
  put_fixed(length, data.size(), 8);
  record += length;
  put_fixed(record, shardwise::detail::masked_crc32c(length), 4);
  record += data;
  put_fixed(record, shardwise::detail::masked_crc32c(data), 4);
  detail::write_all(fd_, record, "the event file '" + path_ + "'");
}

}  // namespace shardwise::train
