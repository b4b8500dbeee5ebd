#include "shardwise/train/run_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "detail/write_all.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

// Creates `path` with nothing in it, refusing one that exists: a run never writes over another
// run's logs.
int create_new(const std::string& path, const std::string& flag) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InvalidArgument(flag + ": cannot create '" + path + "': " + std::strerror(errno) +
                          (errno == EEXIST ? " (the folder holds another run's logs; choose "
                                             "another folder)"
                                           : ""));
  }
  return fd;
}

// `value` as the nearest float; beyond the floats' range, infinity (a plain cast would be
// undefined there).
float as_float(double value) {
  constexpr double kLargest = std::numeric_limits<float>::max();
  if (value > kLargest) return std::numeric_limits<float>::infinity();
  if (value < -kLargest) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(value);
}

}  // namespace

double float_as_json_number(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  double parsed = 0;
  std::from_chars(text, end, parsed);
  return parsed;
}

void RunLog::check_folder(const std::string& directory, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code error;
  const std::string named = flag + " '" + echo_input(directory, 200) + "'";
  if (fs::exists(fs::symlink_status(directory, error)) && !fs::is_directory(directory, error)) {
    throw InvalidArgument(named + " is not a folder");
  }
  for (const char* name : {"config.json", "metrics.jsonl"}) {
    const std::string path = directory + "/" + name;
    if (fs::exists(fs::symlink_status(path, error))) {
      throw InvalidArgument(named + " already holds a run's logs ('" + echo_input(path, 200) +
                            "'); choose another folder or remove it");
    }
  }
}

RunLog::RunLog(const std::string& directory, std::string_view config_json,
               const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code error;
  check_folder(directory, flag);
  fs::create_directories(directory, error);
  if (!fs::is_directory(directory)) {
    throw InvalidArgument(flag + " '" + echo_input(directory, 200) + "' is not a folder" +
                          (error ? " and cannot be made one: " + error.message() : std::string()));
  }
  const std::string config_path = directory + "/config.json";
  metrics_path_ = directory + "/metrics.jsonl";
  const int config_fd = create_new(config_path, flag);
  try {
    detail::write_all(config_fd, std::string(config_json) + "\n", "'" + config_path + "'");
  } catch (...) {
    ::close(config_fd);
    throw;
  }
  ::close(config_fd);
  metrics_fd_ = create_new(metrics_path_, flag);
  try {
    events_ = std::make_unique<EventFileWriter>(directory);
  } catch (...) {
    ::close(metrics_fd_);
    throw;
  }
}

RunLog::~RunLog() { ::close(metrics_fd_); }

void RunLog::record(std::int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  const double wall_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<std::pair<std::string, float>> kept;
  kept.reserve(scalars.size());
  nlohmann::ordered_json line{{"step", step}, {"wall_time", wall_time}};
  for (const auto& [tag, value] : scalars) {
    kept.emplace_back(tag, as_float(value));
    const float as_kept = kept.back().second;
    if (std::isfinite(as_kept)) {
      line[tag] = float_as_json_number(as_kept);
    } else {
      line[tag] = nullptr;
    }
  }
  events_->add_scalars(step, wall_time, kept);
  detail::write_all(metrics_fd_, line.dump() + "\n", "'" + metrics_path_ + "'");
}

}  // namespace shardwise::train
