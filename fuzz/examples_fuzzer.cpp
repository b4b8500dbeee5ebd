// Fine-tuning JSON Lines (train/fine_tuning_data.hpp) under the SmolLM2-style fixture tokenizer and
// SmolLM2-Instruct's chat template: whatever the bytes, the reader gives examples whose marks
// match their tokens and rows that hold them, or a shardwise::Error.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_input.hpp"
#include "shardwise/train/example_set.hpp"
#include "shardwise/train/fine_tuning_data.hpp"

namespace {

// The fixture tokenizer and template in a folder of this process's own, made once.
const shardwise::train::ExampleEncoder& encoder() {
  static const shardwise::train::ExampleEncoder instance = [] {
    const std::string folder = "/tmp/shardwise-examples-fuzzer-" + std::to_string(::getpid());
    (void)::mkdir(folder.c_str(), 0700);
    std::ifstream tokenizer(SHARDWISE_SOURCE_DIR "/tests/text/fixtures/smollm2.tokenizer.json");
    std::ofstream(folder + "/tokenizer.json") << tokenizer.rdbuf();
    std::ifstream chat(SHARDWISE_SOURCE_DIR "/tests/text/fixtures/chat/smollm2_135m_instruct.json");
    const nlohmann::json fixture = nlohmann::json::parse(chat);
    std::ofstream(folder + "/tokenizer_config.json") << nlohmann::json{
        {"chat_template", fixture["template"]},
        {"eos_token", "<|im_end|>"}}.dump();
    shardwise::train::ExampleEncoder made =
        shardwise::train::example_encoder_of(folder + "/tokenizer.json");
    // Read: the folder and the input file go when the process does.
    std::atexit([] {
      const std::string stem = "/tmp/shardwise-examples-fuzzer-" + std::to_string(::getpid());
      std::filesystem::remove_all(stem);
      std::filesystem::remove(stem + ".jsonl");
    });
    return made;
  }();
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  const std::string path =
      "/tmp/shardwise-examples-fuzzer-" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << fuzz::as_text(data, size);
  fuzz::expect_only_errors([&] {
    const auto examples = train::read_json_lines(path, encoder(), "the data");
    for (std::size_t e = 0; e < examples->size(); ++e) {
      fuzz::require(examples->tokens(e).size() == examples->counted(e).size());
      fuzz::require(examples->counted(e).empty() || examples->counted(e)[0] == 0);
    }
    const train::ExampleRows rows(*examples, 0, examples->size(), 16, 1024);
    std::vector<std::int32_t> tokens, targets;
    rows.append_row(size, true, 7, tokens, targets);
    fuzz::require(tokens.size() == 16 && targets.size() == 16);
  });
  return 0;
}
