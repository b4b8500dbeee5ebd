#include "shardwise/train/run_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "../detail/json_reader.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::train {
namespace {

using Json = nlohmann::json;

class Reader {
 public:
  Reader(const Json& root, std::string what) : root_(root), what_(std::move(what)) {}

  [[noreturn]] void refuse(const std::string& key, const Json& value,
                           const std::string& why) const {
    throw InvalidArgument(what_ + ": \"" + key + "\" is " + echo_input(value.dump(), 80) + "; " +
                          why);
  }
  // The object at `key` (dotted), or nullptr where absent or null.
  const Json* find(const std::string& key) const {
    const Json* at = &root_;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
      if (!at->is_object()) return nullptr;
      const auto it = at->find(part);
      if (it == at->end() || it->is_null()) return nullptr;
      at = &*it;
      if (dot == std::string::npos) return at;
      start = dot + 1;
    }
  }
  // Copies `key` into settings[name] as text: a string as it is, an integer as its digits.
  void text(RunConfig& out, const std::string& name, const std::string& key) const {
    const Json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_string()) refuse(key, *v, "expected text");
    out.settings[name] = v->get<std::string>();
  }
  void integer(RunConfig& out, const std::string& name, const std::string& key,
               std::int64_t least) const {
    const Json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number_integer() || v->get<std::int64_t>() < least) {
      refuse(key, *v, "expected an integer of at least " + std::to_string(least));
    }
    out.settings[name] = std::to_string(v->get<std::int64_t>());
  }
  void number(RunConfig& out, const std::string& name, const std::string& key) const {
    const Json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number() || !std::isfinite(v->get<double>())) refuse(key, *v, "expected a number");
    out.settings[name] = v->dump();
  }
  // A switch: settings[name] = "true" where `key` is `when`.
  void flag(RunConfig& out, const std::string& name, const std::string& key, bool when) const {
    const Json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) refuse(key, *v, "expected true or false");
    if (v->get<bool>() == when) out.settings[name] = "true";
  }
  float real(const std::string& key, float fallback) const {
    const Json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0) {
      refuse(key, *v, "expected a finite number of at least 0");
    }
    return static_cast<float>(v->get<double>());
  }

 private:
  const Json& root_;
  std::string what_;
};

}  // namespace

RunConfig read_run_config(std::string_view text, const std::string& what) {
  const Json root = shardwise::detail::parse_json(text, what);
  if (!root.is_object() || !root.contains("settings") || !root.contains("model")) {
    throw InvalidArgument(what +
                          ": not a run's config.json (an object with \"model\" and \"settings\", "
                          "as `shardwise train --log-dir` writes it)");
  }
  const Reader r(root, what);
  RunConfig out;
  r.text(out, "model", "model.given");
  if (const Json* config = r.find("model.config")) {
    if (!config->is_object()) r.refuse("model.config", *config, "expected an object");
    Json model = *config;
    if (const Json* family = r.find("model.family")) {
      if (!family->is_string()) r.refuse("model.family", *family, "expected a name");
      model["family"] = *family;
    }
    out.model_config = model.dump();
  }
  if (const Json* axes = r.find("mesh.axes")) {
    if (!axes->is_array() || axes->empty()) r.refuse("mesh.axes", *axes, "expected a list of axes");
    std::string mesh;
    for (const Json& axis : *axes) {
      if (!axis.is_object() || !axis.contains("name") || !axis["name"].is_string() ||
          !axis.contains("size") || !axis["size"].is_number_integer() ||
          axis["size"].get<std::int64_t>() < 1) {
        r.refuse("mesh.axes", *axes, "expected {\"name\": ..., \"size\": ...} for each axis");
      }
      mesh += (mesh.empty() ? "" : ",") + axis["name"].get<std::string>() + "=" +
              std::to_string(axis["size"].get<std::int64_t>());
    }
    out.settings["mesh"] = mesh;
  }
  if (const Json* threads = r.find("mesh.threads_per_rank"); threads != nullptr && *threads != 0) {
    r.integer(out, "threads", "mesh.threads_per_rank", 1);
  }
  for (const auto& [name, least] : {std::pair{"zero", 0},
                                    {"steps", 1},
                                    {"batch", 1},
                                    {"seq", 1},
                                    {"warmup", 0},
                                    {"seed", 0},
                                    {"eval_every", 0}}) {
    r.integer(out, name, std::string("settings.") + name, least);
  }
  r.number(out, "learning_rate", "settings.learning_rate");
  r.text(out, "recompute", "settings.recompute");
  r.text(out, "precision", "settings.precision");
  r.text(out, "reduce_dtype", "settings.reduce_dtype");
  r.text(out, "residual_dtype", "settings.residual_dtype");
  r.number(out, "capacity_factor", "settings.capacity_factor");
  r.number(out, "expert_bias_rate", "settings.expert_bias_rate");
  r.text(out, "param_sharding", "settings.param_sharding");
  r.flag(out, "sequence_parallel", "settings.sequence_parallel", true);
  r.flag(out, "no_overlap", "settings.overlap", false);
  out.min_learning_rate_ratio = r.real("settings.min_learning_rate_ratio", 0.1F);
  out.beta1 = r.real("settings.beta1", 0.9F);
  out.beta2 = r.real("settings.beta2", 0.95F);
  out.weight_decay = r.real("settings.weight_decay", 0.1F);
  out.grad_clip = r.real("settings.grad_clip", 1.0F);
  r.text(out, "schedule", "pipeline.schedule");
  r.integer(out, "microbatches", "pipeline.microbatches", 1);
  r.integer(out, "virtual_stages", "pipeline.virtual_stages", 1);
  r.text(out, "stages_by", "pipeline.stages_by");
  if (const Json* path = r.find("data.train.path"); path != nullptr && *path != "built-in") {
    r.text(out, "data", "data.train.path");
  }
  r.text(out, "val_data", "data.validation.path");
  r.text(out, "data_format", "data.format");
  r.text(out, "tokenizer", "data.tokenizer");
  r.text(out, "save", "checkpoints.save");
  r.integer(out, "save_every", "checkpoints.save_every", 0);
  r.integer(out, "keep", "checkpoints.keep", 0);
  r.flag(out, "save_async", "checkpoints.save_async", true);
  r.text(out, "resume", "checkpoints.resume");
  r.text(out, "init_from", "checkpoints.init_from");
  return out;
}

void apply_optimizer_settings(const RunConfig& config, TrainSettings& settings) {
  settings.min_learning_rate_ratio = config.min_learning_rate_ratio;
  settings.beta1 = config.beta1;
  settings.beta2 = config.beta2;
  settings.weight_decay = config.weight_decay;
  settings.grad_clip = config.grad_clip;
}

}  // namespace shardwise::train
