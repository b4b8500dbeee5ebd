#pragma once
// What a training job's log folder keeps beside its events: the run's resolved configuration
// (config.json, which every checkpoint of the run also carries) and each step's scalars, named
// as TensorBoard groups them (train/, val/, perf/, memory/).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/train/job_layout.hpp"
#include "shardwise/train/training_job.hpp"

namespace shardwise::train {

// Everything a run was resolved to, defaults filled in, beyond its settings.
struct RunDescription {
  const JobSettings* settings = nullptr;
  const std::optional<PipelineLayout>* pipeline = nullptr;
  std::string backend;
  std::string blas;  // the library of the matrix products and its version
  std::size_t train_tokens = 0;
  std::size_t val_tokens = 0;
  std::uint64_t data_fingerprint = 0;
  std::string sharding_plan;  // the plan's one line
  std::vector<ParameterPlanRow> parameters;
  std::vector<std::string> notes;
};

// config.json's text.
[[nodiscard]] std::string run_config_json(const RunDescription& run);

// What one rank holds, for the memory scalars: the trainer's bytes (parameters, gradients,
// optimizer state, peak activations, peak gathered units) and its process's resident memory.
struct RankMemory {
  std::int64_t held_bytes = 0;
  std::int64_t resident_bytes = 0;
};

// This process's resident memory in bytes (/proc/self/statm); 0 where it cannot be read.
[[nodiscard]] std::int64_t resident_bytes();

// One step's scalars: train/loss, train/learning_rate, train/grad_norm, perf/tokens_per_s,
// perf/step_seconds, val/loss where it was measured, then memory/rank_R/held_bytes and
// memory/rank_R/resident_bytes for every rank.
[[nodiscard]] std::vector<std::pair<std::string, double>> step_scalars(
    const StepReport& step, const std::vector<RankMemory>& ranks);

}  // namespace shardwise::train
