// Fine-tuning examples from the command line, for tests/train/fine_tuning_interop_test.py:
//   shardwise_examples_driver TOKENIZER_JSON EXAMPLES_JSONL
// Prints one JSON object a line, one an example: {"ids": [...], "counted": [0, 1, ...]}; on an
// error, its message on stderr and exit status 1.

#include <iostream>
#include <nlohmann/json.hpp>

#include "shardwise/core/error.hpp"
#include "shardwise/train/fine_tuning_data.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " TOKENIZER_JSON EXAMPLES_JSONL\n";
    return 2;
  }
  try {
    const shardwise::train::ExampleEncoder encoder = shardwise::train::example_encoder_of(argv[1]);
    const auto examples = shardwise::train::read_json_lines(argv[2], encoder, "examples");
    for (std::size_t e = 0; e < examples->size(); ++e) {
      const auto ids = examples->tokens(e);
      const auto counted = examples->counted(e);
      const nlohmann::json line{{"ids", std::vector<std::int32_t>(ids.begin(), ids.end())},
                                {"counted", std::vector<int>(counted.begin(), counted.end())}};
      std::cout << line.dump() << "\n";
    }
    return 0;
  } catch (const shardwise::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
