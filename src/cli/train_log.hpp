#pragma once
// What `shardwise train --log-dir` keeps: the run's resolved configuration (config.json) and
// each step's scalars, named as TensorBoard groups them (train/, val/, perf/, memory/).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/trainer.hpp"
#include "train_layout.hpp"

namespace shardwise::cli {

// Everything a run was resolved to, defaults filled in.
struct TrainRunDescription {
  std::string model;  // --model as given
  models::GptConfig gpt;
  const Mesh* mesh = nullptr;
  std::string backend;
  int threads = 0;   // 0: the BLAS library's default
  std::string blas;  // the library of the matrix products and its version
  train::TrainSettings settings;
  std::int64_t eval_every = 0;
  bool sequence_parallel = false;
  bool json = false;
  std::string param_sharding;
  std::string data;  // a path, or "built-in"
  std::string data_format;
  std::optional<std::string> val_data;
  std::size_t train_tokens = 0;
  std::size_t val_tokens = 0;
  std::uint64_t data_fingerprint = 0;
  std::string sharding_plan;  // the plan's one line
  std::vector<ParameterPlanRow> parameters;
  std::vector<std::string> notes;
  std::optional<models::GptPipeline> pipeline;
};

// config.json's text.
std::string run_config_json(const TrainRunDescription& run);

// What one rank holds, for the memory scalars: the trainer's bytes (parameters, gradients,
// optimizer state, peak activations, peak gathered units) and its process's resident memory.
struct RankMemory {
  std::int64_t held_bytes = 0;
  std::int64_t resident_bytes = 0;
};

// This process's resident memory in bytes (/proc/self/statm); 0 where it cannot be read.
std::int64_t resident_bytes();

// One step's scalars: train/loss, train/learning_rate, train/grad_norm, perf/tokens_per_s,
// perf/step_seconds, val/loss where it was measured, then memory/rank_R/held_bytes and
// memory/rank_R/resident_bytes for every rank.
std::vector<std::pair<std::string, double>> step_scalars(const train::StepStats& stats,
                                                         double step_seconds, double tokens_per_s,
                                                         std::optional<float> val_loss,
                                                         const std::vector<RankMemory>& ranks);

}  // namespace shardwise::cli
