#pragma once
// How the families' readers take the fields of a Hugging Face config.json (docs/huggingface.md):
// a field that changes what the model computes is computed, or refused naming it and its value;
// names, ids, version stamps, metadata and generation settings are taken; a field the reader has
// never seen is taken and said once, in a note. transformers does the same with a field its
// class does not declare: it keeps it as an attribute that nothing computes with.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardwise::models::detail {

// Whether `key` describes nothing any transformers model computes: every key starting with "_"
// (transformers' own bookkeeping: _name_or_path, _attn_implementation_autoset, ...), the
// attributes every PreTrainedConfig has (names, architectures, versions, dtypes, outputs, labels,
// fine-tuning heads' settings), token ids, and generation's defaults.
[[nodiscard]] bool is_hf_metadata_field(const std::string& key);

// Reads one JSON object field by field, remembering which fields it looked at, so that what is
// left at the end is exactly what the reader does not know.
class HfConfigReader {
 public:
  // `what` starts every message ("'gpt2/config.json'"); `reader` names the reader in notes
  // ("shardwise's Llama reader"). InvalidArgument where `json` is no object.
  HfConfigReader(const nlohmann::json& json, std::string what, std::string reader);

  [[noreturn]] void refuse(const std::string& key, const nlohmann::json& value,
                           const std::string& why) const;
  // "\"key\" is missing" (from the object `within`, where one is named).
  [[noreturn]] void refuse_missing(const std::string& key, const std::string& within = "") const;

  // The value of `key`, or null where it is absent or JSON null; the key counts as known.
  const nlohmann::json* find(const std::string& key);
  // Keys the family takes without reading them (its own metadata): known.
  void take(const std::set<std::string>& keys);

  // An integer from 1 to `most`; `fallback` where the key is absent or null (refused as missing
  // where there is none).
  std::size_t size(const std::string& key, std::size_t most,
                   std::optional<std::size_t> fallback = std::nullopt);
  // A finite positive number; `fallback` where absent or null.
  double positive(const std::string& key, double fallback);
  // true or false; `fallback` where absent or null.
  bool flag(const std::string& key, bool fallback);
  // A boolean that must be `expected` where given (attention_bias false): `why` says what the
  // family computes instead.
  void require_flag(const std::string& key, bool expected, const std::string& why);

  // Adds `text` to `notes`: the first kMaxNotes of a file's notes, the rest counted (a hostile
  // file of a million unknown fields makes one more line, not a million).
  void note(std::vector<std::string>& notes, std::string text);
  static constexpr std::size_t kMaxNotes = 16;
  // One note for each field neither read, taken nor metadata:
  // "'x/config.json': field 'foo' is not known to shardwise's Llama reader; taken as not
  // changing the computation"; then, where more were noted than shown, how many more.
  void add_notes(std::vector<std::string>& notes);
  // The first such field refused instead (shardwise's own model files, where an unknown field
  // is a typo: "num_hiden_layers").
  void refuse_unknown(const std::string& family_words) const;

  [[nodiscard]] const std::string& what() const { return what_; }
  [[nodiscard]] const nlohmann::json& json() const { return json_; }

 private:
  [[nodiscard]] std::vector<std::string> unknown_fields() const;

  const nlohmann::json& json_;
  std::string what_;
  std::string reader_;
  std::set<std::string> known_;
  std::size_t noted_ = 0;
};

// A number in a nested object (rope_parameters' factor): finite and positive, `fallback` where
// absent or null, refused as missing where `required`. Messages name `object_key` and `key`.
double nested_positive(const HfConfigReader& reader, const std::string& object_key,
                       const nlohmann::json& object, const std::string& key, double fallback,
                       bool required);

}  // namespace shardwise::models::detail
