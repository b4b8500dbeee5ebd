#include "train_log.hpp"

#include "shardwise/core/error.hpp"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "shardwise/train/run_log.hpp"

namespace shardwise::cli {
namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

std::string run_config_json(const TrainRunDescription& run) {
  using Json = nlohmann::ordered_json;
  const train::TrainSettings& s = run.settings;
  Json axes = Json::array();
  for (std::size_t a = 0; a < run.mesh->num_axes(); ++a) {
    axes.push_back({{"name", run.mesh->axis_names()[a]}, {"size", run.mesh->axis_sizes()[a]}});
  }
  Json parameters = Json::array();
  for (const ParameterPlanRow& row : run.parameters) {
    parameters.push_back({{"parameter", row.name},
                          {"shape", row.shape},
                          {"block", row.block},
                          {"placement", row.placement},
                          {"why", row.why}});
  }
  Json validation =
      run.val_data
          ? Json{{"path", utf8_text(*run.val_data)}, {"tokens", run.val_tokens}}
          : Json{{"held_out", "the last tenth of the training data"}, {"tokens", run.val_tokens}};
  const Json config{
      {"command", "shardwise train"},
      {"model",
       {{"given", utf8_text(run.model)},
        {"n_layer", run.gpt.n_layer},
        {"n_head", run.gpt.n_head},
        {"n_embd", run.gpt.n_embd},
        {"block_size", run.gpt.block_size},
        {"vocab_size", run.gpt.vocab_size}}},
      {"mesh",
       {{"text", run.mesh->to_string()},
        {"axes", axes},
        {"ranks", run.mesh->size()},
        {"backend", run.backend},
        {"threads_per_rank", run.threads},
        {"blas", run.blas}}},
      {"settings",
       {{"zero", s.zero},
        {"steps", s.steps},
        {"batch", s.batch},
        {"seq", s.seq},
        {"learning_rate", train::float_as_json_number(s.learning_rate)},
        {"min_learning_rate_ratio", train::float_as_json_number(s.min_learning_rate_ratio)},
        {"warmup", s.warmup},
        {"beta1", train::float_as_json_number(s.beta1)},
        {"beta2", train::float_as_json_number(s.beta2)},
        {"weight_decay", train::float_as_json_number(s.weight_decay)},
        {"grad_clip", train::float_as_json_number(s.grad_clip)},
        {"seed", s.seed},
        {"overlap", s.overlap},
        {"eval_every", run.eval_every},
        {"sequence_parallel", run.sequence_parallel},
        {"param_sharding", utf8_text(run.param_sharding)},
        {"json", run.json}}},
      {"placements",
       {{"plan", run.sharding_plan}, {"parameters", parameters}, {"notes", run.notes}}},
      {"pipeline", run.pipeline ? Json{{"schedule", to_string(run.pipeline->schedule)},
                                       {"microbatches", run.pipeline->microbatches},
                                       {"virtual_stages", run.pipeline->virtual_stages},
                                       {"layers_per_virtual_stage", run.pipeline->layers}}
                                : Json(nullptr)},
      {"data",
       {{"train", {{"path", utf8_text(run.data)}, {"tokens", run.train_tokens}}},
        {"validation", validation},
        {"format", run.data_format},
        {"fingerprint", hex(run.data_fingerprint)}}}};
  // Paths are bytes: stored escaped (utf8_text); anything else a caller gave that is not UTF-8
  // (a parameter's name from a rules file) is replaced rather than thrown on.
  return config.dump(2, ' ', false, Json::error_handler_t::replace);
}

std::int64_t resident_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  long long pages = 0;
  long long resident = 0;
  const bool read = std::fscanf(statm, "%lld %lld", &pages, &resident) == 2;
  std::fclose(statm);
  const long page = ::sysconf(_SC_PAGESIZE);
  return read && page > 0 ? static_cast<std::int64_t>(resident) * page : 0;
}

std::vector<std::pair<std::string, double>> step_scalars(const train::StepStats& stats,
                                                         double step_seconds, double tokens_per_s,
                                                         std::optional<float> val_loss,
                                                         const std::vector<RankMemory>& ranks) {
  std::vector<std::pair<std::string, double>> scalars{{"train/loss", stats.loss},
                                                      {"train/learning_rate", stats.learning_rate},
                                                      {"train/grad_norm", stats.grad_norm},
                                                      {"perf/tokens_per_s", tokens_per_s},
                                                      {"perf/step_seconds", step_seconds}};
  if (val_loss) scalars.emplace_back("val/loss", *val_loss);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string prefix = "memory/rank_" + std::to_string(r) + "/";
    scalars.emplace_back(prefix + "held_bytes", static_cast<double>(ranks[r].held_bytes));
    scalars.emplace_back(prefix + "resident_bytes", static_cast<double>(ranks[r].resident_bytes));
  }
  return scalars;
}

}  // namespace shardwise::cli
