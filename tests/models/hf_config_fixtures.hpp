#pragma once
// The config.json files of tests/models/fixtures/hf_configs/: published models' configs as the
// hub serves them (published/), and each as transformers 4 and 5 write it after reading it,
// with the configs their classes write by default (transformers4/, transformers5/, written by
// make_hf_configs.py).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardwise::testing {

inline std::filesystem::path hf_config_folder() {
  return std::filesystem::path(SHARDWISE_SOURCE_DIR) / "tests/models/fixtures/hf_configs";
}

// "published/gpt2.json"'s text.
inline std::string hf_config_text(const std::string& relative) {
  std::ifstream in(hf_config_folder() / relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every fixture, as "folder/name.json", in a fixed order.
inline std::vector<std::string> hf_config_fixtures() {
  std::vector<std::string> names;
  for (const char* folder : {"published", "transformers4", "transformers5"}) {
    std::error_code error;
    for (const auto& entry :
         std::filesystem::directory_iterator(hf_config_folder() / folder, error)) {
      if (entry.path().extension() == ".json") {
        names.push_back(std::string(folder) + "/" + entry.path().filename().string());
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// "llama-3.2-1b" of "transformers5/llama-3.2-1b.json".
inline std::string hf_config_model(const std::string& fixture) {
  return std::filesystem::path(fixture).stem().string();
}

}  // namespace shardwise::testing
