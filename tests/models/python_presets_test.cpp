// The Python package plans the trainer's presets from python/shardwise/presets.json (it is built
// on shardwise::core, without the families): that file must be every registered family's
// presets with exactly the manifests the families state, or Python and `shardwise plan` would
// plan different models under one name. SHARDWISE_WRITE_PYTHON_PRESETS=1 writes it afresh.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "shardwise/models/model_registry.hpp"
#include "shardwise/strategy/model_manifest.hpp"

namespace shardwise::models {
namespace {

const std::string kPresetsFile =
    std::string(SHARDWISE_SOURCE_DIR) + "/python/shardwise/presets.json";

nlohmann::ordered_json registry_presets() {
  nlohmann::ordered_json presets = nlohmann::ordered_json::object();
  for (const ModelFamily& family : model_families()) {
    for (const std::string& name : family.presets) {
      presets[name] = nlohmann::ordered_json::parse(family.preset(name)->manifest().to_json());
    }
  }
  return presets;
}

TEST(PythonPresets, AreEveryFamilysPresetsAsTheFamilyStatesThem) {
  const nlohmann::ordered_json expected = registry_presets();
  if (const char* write = std::getenv("SHARDWISE_WRITE_PYTHON_PRESETS");
      write != nullptr && std::string(write) == "1") {
    std::ofstream out(kPresetsFile);
    out << "{\n";
    std::size_t i = 0;
    for (const auto& [name, manifest] : expected.items()) {
      out << "  " << nlohmann::json(name).dump() << ": " << manifest.dump()
          << (++i < expected.size() ? ",\n" : "\n");
    }
    out << "}\n";
  }
  std::ifstream in(kPresetsFile);
  ASSERT_TRUE(in) << kPresetsFile;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::ordered_json shipped = nlohmann::ordered_json::parse(text.str());
  std::vector<std::string> shipped_names, expected_names;
  for (const auto& [name, manifest] : shipped.items()) shipped_names.push_back(name);
  for (const auto& [name, manifest] : expected.items()) expected_names.push_back(name);
  ASSERT_EQ(shipped_names, expected_names)
      << "rerun this test with SHARDWISE_WRITE_PYTHON_PRESETS=1 to write " << kPresetsFile;
  for (const auto& [name, manifest] : expected.items()) {
    const ModelManifest theirs = ModelManifest::from_json(shipped[name].dump());
    EXPECT_EQ(theirs, ModelManifest::from_json(manifest.dump())) << name;
    EXPECT_TRUE(theirs.transformer.has_value()) << name;
  }
}

}  // namespace
}  // namespace shardwise::models
