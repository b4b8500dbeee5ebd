#pragma once
// A TensorBoard event file: TFRecord framing (each record its length, the length's masked
// CRC-32C, the bytes, their masked CRC-32C) of `Event` protocol buffers, the first naming the
// file version, the others a step's scalars as `Summary` values. Written with no TensorFlow or
// protobuf library; every record reaches the operating system when it is added, so TensorBoard
// shows a run as it goes and a killed run loses at most the record being written.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardwise::train {

class EventFileWriter {
 public:
  // Creates events.out.tfevents.<seconds>.<host>.<pid> in `directory` (which must exist) and
  // writes its version record. InvalidArgument naming the path where it cannot.
  explicit EventFileWriter(const std::string& directory);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One Event at `step` and `wall_time` (seconds since the epoch) holding each (tag, value) as a
  // scalar (TensorBoard's are 32-bit floats). InvalidArgument naming the file where the write
  // fails (a full disk).
  void add_scalars(std::int64_t step, double wall_time,
                   const std::vector<std::pair<std::string, float>>& scalars);

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  void write_record(std::string_view data);

  std::string path_;
  int fd_ = -1;
};

}  // namespace shardwise::train
