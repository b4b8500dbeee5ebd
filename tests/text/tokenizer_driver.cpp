// The tokenizer from the command line, for tests/text/tokenizer_interop_test.py:
//   shardwise_tokenizer_driver TOKENIZER_JSON CASES_JSON
// CASES_JSON is {"texts": [...], "decode": [[ids], ...]}; prints one JSON object:
// {"encode": [[ids], ...], "encode_without_special": [[ids], ...], "decode": [text, ...],
//  "decode_skipping_special": [text, ...]}.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "shardwise/core/error.hpp"
#include "shardwise/text/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " TOKENIZER_JSON CASES_JSON\n";
    return 2;
  }
  try {
    const auto tokenizer = shardwise::text::Tokenizer::from_file(argv[1]);
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json cases = nlohmann::json::parse(text.str());
    nlohmann::json out = {{"encode", nlohmann::json::array()},
                          {"encode_without_special", nlohmann::json::array()},
                          {"decode", nlohmann::json::array()},
                          {"decode_skipping_special", nlohmann::json::array()}};
    for (const nlohmann::json& entry : cases.at("texts")) {
      const std::string input = entry.get<std::string>();
      out["encode"].push_back(tokenizer.encode(input));
      out["encode_without_special"].push_back(tokenizer.encode(input, false));
    }
    for (const nlohmann::json& entry : cases.at("decode")) {
      const auto ids = entry.get<std::vector<std::int32_t>>();
      out["decode"].push_back(tokenizer.decode(ids));
      out["decode_skipping_special"].push_back(tokenizer.decode(ids, true));
    }
    // ASCII alone (\u escapes): the reader need not know the locale's encoding.
    std::cout << out.dump(-1, ' ', true) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "shardwise_tokenizer_driver: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
