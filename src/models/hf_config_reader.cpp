#include "detail/hf_config_reader.hpp"

#include <cmath>
#include <cstdint>

#include "shardwise/core/error.hpp"

namespace shardwise::models::detail {
namespace {

// PreTrainedConfig's own attributes (transformers 2 to 5) that say nothing a model computes:
// names, versions, dtypes (shardwise computes in float32 whatever the file's weights are),
// outputs, framework switches, labels and fine-tuning heads, and the kernel that computes
// attention (every implementation computes the same attention).
const std::set<std::string>& common_metadata() {
  static const std::set<std::string> fields{
      "architectures", "transformers_version", "torch_dtype", "dtype", "name_or_path",
      "attn_implementation", "experts_implementation", "output_attentions", "output_hidden_states",
      "return_dict", "use_return_dict", "output_past", "torchscript", "use_bfloat16",
      "tf_legacy_loss", "gradient_checkpointing", "chunk_size_feed_forward", "is_decoder",
      "tie_encoder_decoder", "cross_attention_hidden_size", "id2label", "label2id", "num_labels",
      "finetuning_task", "problem_type", "task_specific_params", "tokenizer_class", "prefix",
      "initializer_range", "use_cache",
      // Token ids: what a tokenizer and a generator use, not the network.
      "bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id", "sep_token_id",
      "mask_token_id", "cls_token_id", "decoder_start_token_id"};
  return fields;
}

// Generation's defaults, which configs of transformers 4 and earlier carry (transformers 5 pops
// them: GenerationConfig's parameters).
const std::set<std::string>& generation_settings() {
  static const std::set<std::string> fields{"max_length",
                                            "max_new_tokens",
                                            "min_length",
                                            "min_new_tokens",
                                            "do_sample",
                                            "early_stopping",
                                            "num_beams",
                                            "num_beam_groups",
                                            "diversity_penalty",
                                            "temperature",
                                            "top_k",
                                            "top_p",
                                            "min_p",
                                            "typical_p",
                                            "epsilon_cutoff",
                                            "eta_cutoff",
                                            "repetition_penalty",
                                            "encoder_repetition_penalty",
                                            "length_penalty",
                                            "no_repeat_ngram_size",
                                            "encoder_no_repeat_ngram_size",
                                            "bad_words_ids",
                                            "num_return_sequences",
                                            "output_scores",
                                            "output_logits",
                                            "return_dict_in_generate",
                                            "forced_bos_token_id",
                                            "forced_eos_token_id",
                                            "remove_invalid_values",
                                            "exponential_decay_length_penalty",
                                            "suppress_tokens",
                                            "begin_suppress_tokens",
                                            "renormalize_logits",
                                            "sequence_bias",
                                            "guidance_scale",
                                            "low_memory",
                                            "penalty_alpha",
                                            "stop_strings",
                                            "assistant_confidence_threshold",
                                            "assistant_lookbehind",
                                            "num_assistant_tokens",
                                            "num_assistant_tokens_schedule",
                                            "target_lookbehind"};
  return fields;
}

std::string shown(const nlohmann::json& value) { return echo_input(value.dump(), 60); }

}  // namespace

bool is_hf_metadata_field(const std::string& key) {
  return key.starts_with("_") || common_metadata().count(key) != 0 ||
         generation_settings().count(key) != 0;
}

HfConfigReader::HfConfigReader(const nlohmann::json& json, std::string what, std::string reader)
    : json_(json), what_(std::move(what)), reader_(std::move(reader)) {
  if (!json_.is_object()) {
    throw InvalidArgument(what_ + " holds " + shown(json_) + ", not a JSON object of fields");
  }
}

void HfConfigReader::refuse(const std::string& key, const nlohmann::json& value,
                            const std::string& why) const {
  throw InvalidArgument(what_ + ": \"" + key + "\" is " + shown(value) + "; " + why);
}

void HfConfigReader::refuse_missing(const std::string& key, const std::string& within) const {
  throw InvalidArgument(what_ + ": \"" + key + "\" is missing" +
                        (within.empty() ? "" : " from \"" + within + "\""));
}

const nlohmann::json* HfConfigReader::find(const std::string& key) {
  known_.insert(key);
  const auto it = json_.find(key);
  return it == json_.end() || it->is_null() ? nullptr : &*it;
}

void HfConfigReader::take(const std::set<std::string>& keys) {
  known_.insert(keys.begin(), keys.end());
}

std::size_t HfConfigReader::size(const std::string& key, std::size_t most,
                                 std::optional<std::size_t> fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    refuse_missing(key);
  }
  if (!v->is_number_integer() || v->get<std::int64_t>() < 1 ||
      v->get<std::int64_t>() > static_cast<std::int64_t>(most)) {
    refuse(key, *v, "expected an integer from 1 to " + std::to_string(most));
  }
  return v->get<std::size_t>();
}

double HfConfigReader::positive(const std::string& key, double fallback) {
  (void)find(key);
  return nested_positive(*this, "", json_, key, fallback, false);
}

bool HfConfigReader::flag(const std::string& key, bool fallback) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) refuse(key, *v, "expected true or false");
  return v->get<bool>();
}

void HfConfigReader::require_flag(const std::string& key, bool expected, const std::string& why) {
  if (flag(key, expected) != expected) refuse(key, json_[key], why);
}

std::vector<std::string> HfConfigReader::unknown_fields() const {
  std::vector<std::string> fields;
  for (const auto& item : json_.items()) {
    if (known_.count(item.key()) == 0 && !is_hf_metadata_field(item.key())) {
      fields.push_back(item.key());
    }
  }
  return fields;
}

void HfConfigReader::note(std::vector<std::string>& notes, std::string text) {
  if (++noted_ <= kMaxNotes) notes.push_back(std::move(text));
}

void HfConfigReader::add_notes(std::vector<std::string>& notes) {
  for (const std::string& field : unknown_fields()) {
    note(notes, what_ + ": field '" + echo_input(field, 60) + "' is not known to " + reader_ +
                    "; taken as not changing the computation");
  }
  if (noted_ > kMaxNotes) {
    notes.push_back(what_ + ": " + std::to_string(noted_ - kMaxNotes) +
                    " more fields are taken as not changing the computation");
  }
}

void HfConfigReader::refuse_unknown(const std::string& family_words) const {
  const std::vector<std::string> fields = unknown_fields();
  if (fields.empty()) return;
  throw InvalidArgument(what_ + ": \"" + echo_input(fields.front(), 60) + "\" is a field " +
                        family_words +
                        " does not implement (a model that sets it may compute otherwise)");
}

double nested_positive(const HfConfigReader& reader, const std::string& object_key,
                       const nlohmann::json& object, const std::string& key, double fallback,
                       bool required) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required) reader.refuse_missing(key, object_key);
    return fallback;
  }
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0) {
    if (object_key.empty()) reader.refuse(key, *it, "expected a finite positive number");
    reader.refuse(object_key, object,
                  "its \"" + key + "\" is " + shown(*it) + ", not a finite positive number");
  }
  return it->get<double>();
}

}  // namespace shardwise::models::detail
