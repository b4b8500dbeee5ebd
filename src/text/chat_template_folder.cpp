// A model folder's chat template and special tokens, where transformers finds them:
// chat_template.jinja first, else tokenizer_config.json's `chat_template` (a string, or a list
// of named templates of which transformers' apply_chat_template takes "default").

#include <system_error>

#include "detail/file_io.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/text/chat_template.hpp"

namespace shardwise::text {
namespace {

std::optional<nlohmann::ordered_json> tokenizer_config(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / "tokenizer_config.json";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  const std::string text = shardwise::detail::read_file(path.string(), "tokenizer config");
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("tokenizer config '" + echo_input(path.string()) +
                          "' is not JSON: " + e.what());
  }
}

std::string field_error(const std::filesystem::path& path, const std::string& field,
                        const std::string& why) {
  return "tokenizer config '" + echo_input((path / "tokenizer_config.json").string()) +
         "': field '" + field + "' " + why;
}

}  // namespace

std::optional<ChatTemplate> chat_template_of_folder(const std::filesystem::path& folder) {
  const std::filesystem::path jinja = folder / "chat_template.jinja";
  std::error_code error;
  if (std::filesystem::exists(jinja, error)) {
    return ChatTemplate::parse(shardwise::detail::read_file(jinja.string(), "chat template"),
                               jinja.string());
  }
  const std::optional<nlohmann::ordered_json> config = tokenizer_config(folder);
  if (!config || !config->is_object() || !config->contains("chat_template")) return std::nullopt;
  const nlohmann::ordered_json& field = (*config)["chat_template"];
  const std::string what = (folder / "tokenizer_config.json").string() + " chat_template";
  if (field.is_null()) return std::nullopt;
  if (field.is_string()) return ChatTemplate::parse(field.get<std::string>(), what);
  if (!field.is_array()) {
    throw InvalidArgument(field_error(
        folder, "chat_template",
        "is a " + std::string(field.type_name()) + ", not a string or a list of named templates"));
  }
  for (const auto& entry : field) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      throw InvalidArgument(
          field_error(folder, "chat_template",
                      "holds an entry that is not {\"name\": ..., \"template\": ...}"));
    }
    if (entry["name"] == "default")
      return ChatTemplate::parse(entry["template"].get<std::string>(), what + " 'default'");
  }
  return std::nullopt;  // transformers then asks for a template by name; none is the default
}

nlohmann::ordered_json special_tokens_of_folder(const std::filesystem::path& folder) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  const std::optional<nlohmann::ordered_json> config = tokenizer_config(folder);
  if (!config || !config->is_object()) return tokens;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!config->contains(key)) continue;
    const nlohmann::ordered_json& value = (*config)[key];
    if (value.is_null()) continue;
    if (value.is_string()) {
      tokens[key] = value;
    } else if (value.is_object() && value.contains("content") && value["content"].is_string()) {
      tokens[key] = value["content"];  // an AddedToken written out
    } else {
      throw InvalidArgument(
          field_error(folder, key, "is neither a string nor {\"content\": string}"));
    }
  }
  return tokens;
}

}  // namespace shardwise::text
