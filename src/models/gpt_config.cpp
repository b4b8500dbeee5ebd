// The trainer's model file: the one reader `shardwise train` and `shardwise plan` share, so that
// both count the same model.
#include <array>

#include "detail/gpt_config_json.hpp"
#include "detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::models {
namespace detail {

namespace {

constexpr std::array<const char*, 5> kFields = {"n_layer", "n_head", "n_embd", "block_size",
                                                "vocab_size"};

}  // namespace

bool is_gpt_config(const nlohmann::json& json) {
  return json.is_object() && json.contains("block_size");
}

GptConfig gpt_config_of(const nlohmann::json& json, const std::string& what) {
  const std::string named = what + ": ";
  if (!json.is_object()) {
    throw InvalidArgument(named +
                          "expected a JSON object with n_layer, n_head, n_embd, "
                          "block_size and vocab_size, not " +
                          shardwise::detail::json_type_name(json));
  }
  for (const auto& [key, value] : json.items()) {
    bool known = false;
    for (const char* field : kFields) known = known || key == field;
    if (!known) {
      throw InvalidArgument(named + "\"" + echo_input(key, 100) +
                            "\" is not a field of the model (n_layer, n_head, n_embd, "
                            "block_size, vocab_size)");
    }
  }
  GptConfig c;
  std::size_t* into[] = {&c.n_layer, &c.n_head, &c.n_embd, &c.block_size, &c.vocab_size};
  for (std::size_t f = 0; f < kFields.size(); ++f) {
    const char* key = kFields[f];
    if (!json.contains(key)) {
      throw InvalidArgument(named + "needs \"" + key + "\" (a positive integer)");
    }
    const nlohmann::json& value = json[key];
    // Larger than any bound validate() allows, so that it names the field with its value.
    constexpr std::uint64_t kLargest = std::uint64_t{1} << 40;
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > kLargest) {
      throw InvalidArgument(named + "\"" + key + "\" is " + echo_input(value.dump(), 40) +
                            "; expected a positive integer");
    }
    *into[f] = static_cast<std::size_t>(value.get<std::uint64_t>());
  }
  try {
    validate(c);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(named + e.what());
  }
  return c;
}

}  // namespace detail

}  // namespace shardwise::models
