#pragma once
// How a caller names a job's settings in the messages it gets back: a program calls them by the
// settings' own names ("batch", "mesh", "sequence_parallel"), and a command maps each to the
// flag its user typed ("--batch"). The training layer's errors name a setting through this, so
// that a C++ or Python caller is never told about a flag it has not got.

#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace shardwise::train {

class SettingNames {
 public:
  SettingNames() = default;
  // Setting name to the caller's name for it; a setting not in the map keeps its own.
  explicit SettingNames(std::map<std::string, std::string, std::less<>> names)
      : names_(std::move(names)) {}

  [[nodiscard]] std::string operator()(std::string_view setting) const {
    const auto found = names_.find(setting);
    return found == names_.end() ? std::string(setting) : found->second;
  }

 private:
  std::map<std::string, std::string, std::less<>> names_;
};

}  // namespace shardwise::train
