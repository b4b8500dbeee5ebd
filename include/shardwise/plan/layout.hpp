#pragma once
// A training setup (batch, sequence, precision, optimizer, recompute) and a parallel layout of
// it: data, fsdp, model (tensor), pipeline and expert degrees, ZeRO stage, micro-batches and
// schedule.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mesh.hpp"
#include "shardwise/strategy/element_types.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/strategy/precision.hpp"
#include "shardwise/strategy/recompute.hpp"

namespace shardwise::plan {

// What a plan counts each array in. fp32 and bf16 are shardwise's trainer's precisions, counted
// array by array as it keeps them (docs/precision.md: float32 masters, gradients and moments;
// under bf16 the computation's bf16 copies and ZeRO-3's bf16 gathers); bf16-mixed is the layout
// Rajbhandari et al. (2020) count and Megatron-LM keeps (bf16 parameters, gradients and
// activations, float32 masters and moments).
enum class Precision { kFp32, kBf16, kBf16Mixed };
enum class Optimizer { kAdam, kSgd };
// The schedule and the recomputation are the strategies' enums, which the trainer runs.
using shardwise::Recompute;
using shardwise::ScheduleKind;

std::string to_string(Precision value);  // "fp32", "bf16", "bf16-mixed"
// The trainer's precision as a plan counts it.
Precision planned(shardwise::Precision value);
// Whether shardwise's trainer keeps this precision's arrays (fp32, bf16): the planner then counts
// the trainer's own arrays rather than the published formulas.
bool trainer_runs(Precision value);
// The element type of each kind of array a precision keeps: fp32 everything float32; bf16
// ElementTypes::bf16_compute(); bf16-mixed ElementTypes::bf16_mixed(). `reduce`, where given,
// is what gradients are reduced in instead of the precision's own (float32 for fp32 and bf16,
// bf16 for bf16-mixed; Megatron-LM's --bf16 without --grad-reduce-in-bf16 reduces in float32).
// `residual`, where given under bf16, is what the residual stream is kept in (float32 if not).
ElementTypes element_types(Precision value, std::optional<DType> reduce = std::nullopt,
                           std::optional<DType> residual = std::nullopt);
std::string to_string(Optimizer value);  // "adam", "sgd"
using shardwise::to_string;
// The inverses; InvalidArgument naming `flag` and the text otherwise.
Precision parse_precision(const std::string& text, const std::string& flag);
Optimizer parse_optimizer(const std::string& text, const std::string& flag);
ScheduleKind parse_schedule(const std::string& text, const std::string& flag);

struct TrainingSetup {
  // The least compute efficiency a prediction takes (below it a step would take 100x its FLOPs'
  // time at peak: not a plan anyone runs).
  static constexpr double kLeastEfficiency = 0.01;

  std::int64_t global_batch = 1;  // sequences per step
  std::int64_t seq = 1;
  std::int64_t micro_batch = 1;  // sequences per micro-batch on a data-parallel rank
  Precision precision = Precision::kBf16Mixed;
  // What gradients are reduced in (the trainer's reduce_dtype): float32 or bf16; absent, the
  // precision's own (element_types).
  std::optional<DType> reduce_dtype;
  // What the residual stream is kept in (the trainer's residual_dtype) under precision bf16:
  // float32 or bf16; absent, float32 (bf16-mixed counts it in bf16, fp32 in float32).
  std::optional<DType> residual_dtype;
  Optimizer optimizer = Optimizer::kAdam;
  // A Mixture of Experts keeps an expert bias (the trainer's expert_bias_rate above 0): each
  // step sums its layers' choice counts over the ranks that route other rows.
  bool expert_bias = false;
  // The share of peak FLOP/s the matrix products reach, and the share of data-parallel and
  // FSDP communication hidden behind compute (docs/planner.md states both): kLeastEfficiency
  // to 1, and 0 to 1.
  double compute_efficiency = 0.5;
  double overlap = 0.5;

  // Bounds past any real run, so that tokens per step (global_batch x seq) stay exact.
  static constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 32;
  static constexpr std::int64_t kMaxSeq = std::int64_t{1} << 24;
  // InvalidArgument naming the field (global_batch, seq, micro_batch, compute_efficiency,
  // overlap, reduce_dtype, residual_dtype) and its value where it is outside the bounds
  // above, micro_batch above global_batch, a share not finite or outside its range, or a
  // residual_dtype its precision does not keep.
  void validate() const;
};

struct Layout {
  std::int64_t data = 1;
  std::int64_t fsdp = 1;
  std::int64_t model = 1;
  std::int64_t pipeline = 1;
  int zero = 0;
  std::int64_t microbatches = 1;  // per step on each data-parallel rank (m)
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  std::int64_t virtual_stages = 1;  // V: model chunks per pipeline rank (interleaved)
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  // The layers of each virtual stage, pipeline x virtual_stages of them in order (virtual stage
  // k runs on pipeline rank k mod pipeline, as the trainer places them); empty: an even split,
  // which needs pipeline x virtual_stages to divide the layers.
  std::vector<std::int64_t> stage_layers;
  // Expert parallelism: a Mixture of Experts' experts split over this many ranks, which split
  // the batch too (last, so that layouts written in order before it keep their meaning).
  std::int64_t expert = 1;

  [[nodiscard]] std::int64_t devices() const { return data * fsdp * expert * model * pipeline; }
  // The ranks a batch is split over.
  [[nodiscard]] std::int64_t data_parallel() const { return data * fsdp * expert; }
  // "data=8,fsdp=1,model=8,pipeline=2 zero 1, 16 micro-batches 1f1b" (",expert=4" after the
  // pipeline where experts are split).
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Layout&, const Layout&) = default;
};

// A layout's degrees from a mesh's axes, by their roles (strategy/mesh_axes.hpp): InvalidArgument
// starting with `field` for an axis no role has or one the planner does not plan (the roles the
// training layer does not run yet).
Layout layout_of_axes(const Mesh& mesh, const std::string& field);

}  // namespace shardwise::plan
