#pragma once
// A run's settings read back from the config.json its log folder keeps (train/job_log.hpp
// writes it), so that a run can be replayed: `shardwise train --config run.json`. Each setting
// comes back by its name, as the text it is given as; the caller (a command, a program) takes
// them where it was given nothing else, and says which it overrode.

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "shardwise/train/trainer.hpp"

namespace shardwise::train {

struct RunConfig {
  // Settings by name, each as its text: model (what the run was given: a preset, a file, a
  // folder), mesh ("data=2,model=2"), zero, steps, batch, seq, learning_rate, warmup, seed,
  // eval_every, recompute, param_sharding, threads, data, data_format, val_data, tokenizer,
  // schedule, microbatches, virtual_stages, stages_by, save, save_every, keep, resume, init_from;
  // and the switches sequence_parallel, no_overlap, save_async ("true" where set). A setting the
  // file leaves out, or holds as null, is absent.
  std::map<std::string, std::string> settings;
  // The model's own configuration ({"family": ..., sizes}): the model to build where `model`
  // no longer names it (a folder since moved).
  std::string model_config;
  // The optimizer's settings no command flag names (betas, weight decay, clipping, the least
  // learning rate), as the run had them.
  float min_learning_rate_ratio = 0.1F;
  float beta1 = 0.9F;
  float beta2 = 0.95F;
  float weight_decay = 0.1F;
  float grad_clip = 1.0F;
};

// InvalidArgument starting with `what` where the text is no JSON object of a run's config, or a
// setting has the wrong type or a value no run has (the key named).
[[nodiscard]] RunConfig read_run_config(std::string_view text, const std::string& what);

// Sets the optimizer's settings `config` holds into `settings`.
void apply_optimizer_settings(const RunConfig& config, TrainSettings& settings);

}  // namespace shardwise::train
