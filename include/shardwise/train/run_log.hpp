#pragma once
// A run's logs in one folder, written as the run goes: config.json (the resolved configuration,
// at start), a TensorBoard event file and metrics.jsonl holding the same scalars per step. A
// folder that already holds a run's logs is refused: a second run would mix its numbers into
// the first's curves.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shardwise/train/event_file.hpp"

namespace shardwise::train {

// `value` as the double whose shortest decimal is the float's shortest decimal (1e-3F as 0.001,
// not 0.0010000000474974513): what a JSON log writes, and it reads back as the same float.
double float_as_json_number(float value);

class RunLog {
 public:
  // Opens `directory` (created with its parents where missing) and writes `config_json` to its
  // config.json. InvalidArgument naming `flag` and the path where it is not a folder, cannot be
  // written, or holds a config.json or metrics.jsonl already.
  RunLog(const std::string& directory, std::string_view config_json,
         const std::string& flag = "--log-dir");
  // What the constructor refuses of `directory` before it makes anything (not a folder, a
  // run's logs in it), checked without making anything: for a command to refuse it before it
  // prints.
  static void check_folder(const std::string& directory, const std::string& flag = "--log-dir");
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // One step's scalars, as an Event of the event file and a line of metrics.jsonl
  // ({"step": s, "wall_time": t, tag: value, ...}); each value is kept as the 32-bit float
  // TensorBoard keeps, so both hold the same numbers (a value JSON cannot hold, NaN or
  // infinity, is null in the JSON line).
  void record(std::int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  [[nodiscard]] const std::string& event_file() const { return events_->path(); }

 private:
  std::unique_ptr<EventFileWriter> events_;
  std::string metrics_path_;
  int metrics_fd_ = -1;
};

}  // namespace shardwise::train
