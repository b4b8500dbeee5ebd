#include "shardwise/train/job_log.hpp"

#include "shardwise/core/error.hpp"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "shardwise/train/run_log.hpp"

namespace shardwise::train {
namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// A path, escaped as utf8_text does, or null.
nlohmann::ordered_json optional_text(const std::optional<std::string>& path) {
  return path ? nlohmann::ordered_json(utf8_text(*path)) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string run_config_json(const RunDescription& run) {
  using Json = nlohmann::ordered_json;
  const JobSettings& job = *run.settings;
  const TrainSettings& s = job.training;
  const Mesh& mesh = job.mesh;
  Json axes = Json::array();
  for (std::size_t a = 0; a < mesh.num_axes(); ++a) {
    axes.push_back({{"name", mesh.axis_names()[a]}, {"size", mesh.axis_sizes()[a]}});
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
      job.data.validation_path
          ? Json{{"path", utf8_text(*job.data.validation_path)}, {"tokens", run.val_tokens}}
          : Json{{"held_out", "the last tenth of the training data"}, {"tokens", run.val_tokens}};
  const std::optional<PipelineLayout>& pipeline = *run.pipeline;
  Json caller = Json::object();
  for (const auto& [name, value] : job.caller_settings) caller[name] = utf8_text(value);
  const Json config{
      {"command", "shardwise train"},
      {"model",
       {{"given", utf8_text(job.model_given)},
        {"family", job.model->family()},
        {"description", job.model->describe()},
        {"config", Json::parse(job.model->config_json())}}},
      {"mesh",
       {{"text", mesh.to_string()},
        {"axes", axes},
        {"ranks", mesh.size()},
        {"backend", run.backend},
        {"threads_per_rank", job.threads},
        {"blas", run.blas}}},
      {"settings",
       {{"zero", s.zero},
        {"steps", s.steps},
        {"batch", s.batch},
        {"seq", s.seq},
        {"learning_rate", float_as_json_number(s.learning_rate)},
        {"min_learning_rate_ratio", float_as_json_number(s.min_learning_rate_ratio)},
        {"warmup", s.warmup},
        {"beta1", float_as_json_number(s.beta1)},
        {"beta2", float_as_json_number(s.beta2)},
        {"weight_decay", float_as_json_number(s.weight_decay)},
        {"grad_clip", float_as_json_number(s.grad_clip)},
        {"seed", s.seed},
        {"overlap", s.overlap},
        {"eval_every", job.eval_every},
        {"sequence_parallel", job.sequence_parallel},
        {"recompute", to_string(job.recompute)},
        {"precision", to_string(job.precision)},
        {"reduce_dtype", float_dtype_name(s.reduce_dtype)},
        {"residual_dtype", float_dtype_name(job.residual_dtype)},
        {"capacity_factor", job.capacity_factor},
        {"expert_bias_rate", job.expert_bias_rate},
        {"param_sharding", utf8_text(job.param_sharding)},
        {"caller", caller}}},
      {"placements",
       {{"plan", run.sharding_plan}, {"parameters", parameters}, {"notes", run.notes}}},
      {"pipeline",
       pipeline
           ? Json{{"schedule", to_string(pipeline->schedule)},
                  {"microbatches", pipeline->microbatches},
                  {"virtual_stages", pipeline->virtual_stages},
                  {"layers_per_virtual_stage", pipeline->layers},
                  {"stages_by",
                   job.pipeline && job.pipeline->stages_by == StagesBy::kCost ? "cost" : "count"}}
           : Json(nullptr)},
      {"checkpoints",
       {{"save", optional_text(job.checkpoints.save)},
        {"save_every", job.checkpoints.save_every},
        {"keep", job.checkpoints.keep},
        {"save_async", job.checkpoints.save_async},
        {"resume", optional_text(job.checkpoints.resume)},
        {"init_from", optional_text(job.checkpoints.init_from_path)}}},
      {"data",
       {{"train",
         {{"path", job.data.path ? utf8_text(*job.data.path) : std::string("built-in")},
          {"tokens", run.train_tokens}}},
        {"validation", validation},
        {"format", to_string(job.data.format)},
        {"tokenizer", job.data.tokenizer ? Json(utf8_text(*job.data.tokenizer)) : Json(nullptr)},
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

std::vector<std::pair<std::string, double>> step_scalars(const StepReport& step,
                                                         const std::vector<RankMemory>& ranks) {
  std::vector<std::pair<std::string, double>> scalars{{"train/loss", step.loss},
                                                      {"train/learning_rate", step.learning_rate},
                                                      {"train/grad_norm", step.grad_norm},
                                                      {"perf/tokens_per_s", step.tokens_per_s},
                                                      {"perf/step_seconds", step.seconds}};
  if (step.val_loss) scalars.emplace_back("val/loss", *step.val_loss);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string prefix = "memory/rank_" + std::to_string(r) + "/";
    scalars.emplace_back(prefix + "held_bytes", static_cast<double>(ranks[r].held_bytes));
    scalars.emplace_back(prefix + "resident_bytes", static_cast<double>(ranks[r].resident_bytes));
  }
  return scalars;
}

}  // namespace shardwise::train
