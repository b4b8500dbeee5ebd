#pragma once
// What one layout of a training setup costs, from published formulas (docs/planner.md):
// memory per device after ZeRO (Rajbhandari et al. 2020), activations per layer with tensor and
// sequence parallelism and recompute (Korthikanti et al. 2022), model and hardware FLOPs per
// step (Narayanan et al. 2021), bytes moved per mesh axis, and a step time from compute at a
// stated efficiency, collectives by an alpha-beta model on nccl-tests' bus bandwidth, and the
// pipeline bubble.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/plan/cluster.hpp"
#include "shardwise/plan/layout.hpp"
#include "shardwise/plan/model_shape.hpp"

namespace shardwise::plan {

struct MemoryPerDevice {
  std::int64_t params = 0;
  std::int64_t grads = 0;
  std::int64_t optimizer = 0;
  std::int64_t activations = 0;
  std::int64_t activations_per_layer = 0;  // one layer of one micro-batch, as Korthikanti counts
  std::int64_t buffers = 0;                // gathered FSDP layers
  // The computation's copies of the parameters where it reads another type than the masters
  // (the trainer's bf16: 2 bytes a parameter, 4 for each element read widened; under ZeRO-3 the
  // gathered units' at their most).
  std::int64_t compute_copies = 0;
  [[nodiscard]] std::int64_t total() const {
    return params + grads + optimizer + activations + buffers + compute_copies;
  }
};

struct Prediction {
  Layout layout;
  MemoryPerDevice memory;  // of the most loaded device (of the most loaded pipeline stage)
  // The memory of each pipeline stage's devices, stage 0 first (one entry without a pipeline):
  // `memory` is the one of them with the largest total (the first of equals).
  std::vector<MemoryPerDevice> memory_by_stage;
  // Bytes a device sends per step along each mesh axis ("data", "fsdp", "model", "pipeline").
  std::map<std::string, std::int64_t> comm_bytes_per_step;
  // The same bytes by collective: "all_reduce", "all_gather", "reduce_scatter", "send".
  std::map<std::string, std::int64_t> comm_bytes_per_kind;
  double model_flops_per_step = 0;
  double hardware_flops_per_step = 0;
  double compute_time_s = 0;  // without the bubble
  double bubble_time_s = 0;
  double comm_time_s = 0;  // exposed communication
  double step_time_s = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  bool fits = false;
};

// Why the layout cannot run this setup on this cluster (degrees that do not multiply to the
// devices or divide heads, layers or the batch; an interleaved schedule without what it needs),
// or nothing.
std::optional<std::string> layout_problem(const ModelShape& model, const Cluster& cluster,
                                          const TrainingSetup& setup, const Layout& layout);

// Throws InvalidArgument with layout_problem's reason.
Prediction evaluate(const ModelShape& model, const Cluster& cluster, const TrainingSetup& setup,
                    const Layout& layout);
// The same with zero_chunks(model, zero_group(layout), layout.model, layout.expert) computed once
// by the caller (a
// search evaluates many layouts of one group size).
Prediction evaluate(const ModelShape& model, const Cluster& cluster, const TrainingSetup& setup,
                    const Layout& layout, const std::vector<std::int64_t>& chunks);

// The ranks ZeRO shards over: fsdp where it is larger than 1, else data; 1 at ZeRO 0.
std::int64_t zero_group(const Layout& layout);
// Per unit of the model, the elements one of `shards` ranks keeps when ZeRO splits every
// parameter as shardwise's trainer does by default: FSDPStrategy's rule (dimension 0, else a
// later dimension the group divides, else whole) with minimum size 1, on the block a rank of
// `model_degree` tensor-parallel ranks (and `expert_degree` expert ranks) holds of the parameter
// (ModelShape::Unit::model_split, ModelShape::Unit::experts).
std::vector<std::int64_t> zero_chunks(const ModelShape& model, std::int64_t shards,
                                      std::int64_t model_degree, std::int64_t expert_degree = 1);

// Korthikanti et al. 2022, bytes of one transformer layer's activations for one micro-batch of
// b sequences of s tokens with 16-bit activations: sbh (10 + 24/t + 5as/(ht)) without sequence
// parallelism, sbh/t (34 + 5as/h) with it; selective recompute drops the 5as/h term; full
// recompute keeps only the layer's input, 2sbh (2sbh/t with sequence parallelism). The 24 and
// 34 assume GPT's MLP of 4h and as many key/value heads as heads; other shapes scale those terms.
std::int64_t activation_bytes_per_layer(const ModelShape& model, std::int64_t seq,
                                        std::int64_t micro_batch, std::int64_t tensor,
                                        bool sequence_parallel, Recompute recompute);

// Narayanan et al. 2021: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) for GPT, in general 6 T N +
// 12 l s (a d) T for T tokens and N parameters in matrix products.
double model_flops(const ModelShape& model, std::int64_t tokens, std::int64_t seq);
// With the recomputed forward work: selective adds the attention scores (4 l s (a d) T), full a
// whole forward pass of the layers (2 T N_layers + 4 l s (a d) T).
double hardware_flops(const ModelShape& model, std::int64_t tokens, std::int64_t seq,
                      Recompute recompute);

}  // namespace shardwise::plan
