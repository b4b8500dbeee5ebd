#include "shardwise/plan/cost_model.hpp"

#include "shardwise/strategy/pipeline_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "shardwise/core/error.hpp"
#include "shardwise/strategy/activation_table.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"

namespace shardwise::plan {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

ElementTypes types_of(const TrainingSetup& setup) {
  return element_types(setup.precision, setup.reduce_dtype, setup.residual_dtype);
}

std::int64_t size_of(DType dtype) { return static_cast<std::int64_t>(size_in_bytes(dtype)); }

// Whether the planner counts shardwise's trainer's own arrays (its activation table, its ZeRO-2
// buffers, its compute copies; the agreement tests hold the two equal for every layout they
// run), or the published formulas (bf16-mixed).
bool trainer_runs(const TrainingSetup& setup) { return plan::trainer_runs(setup.precision); }

// Bytes per parameter of what a device keeps, from the element type of each array. The trainer's
// precisions count its arrays: the masters as the parameters, their gradients, AdamW's moments
// (4 + 4 + 8), and in bf16 the computation's copies apart. Mixed precision counts 2 + 2 + 12 for
// Adam as Rajbhandari et al. (2020) do (4 for SGD's master).
struct StateBytes {
  std::int64_t params;
  std::int64_t grads;
  std::int64_t optimizer;
  std::int64_t reduced;     // a gradient's element as the data-parallel ranks reduce it
  std::int64_t gathered;    // a parameter's element as ZeRO-3 gathers it
  std::int64_t regathered;  // as ZeRO 1 and 2 gather the updated parameters
  // The computation's copies where it reads another type than the masters (the trainer's bf16):
  // each parameter's rounding, and the roundings widened of those read outside a product.
  std::int64_t copy;
  std::int64_t widened;
};

StateBytes state_bytes(const TrainingSetup& setup) {
  const ElementTypes types = types_of(setup);
  const bool adam = setup.optimizer == Optimizer::kAdam;
  const std::int64_t moments = adam ? 2 * size_of(types.optimizer) : 0;
  if (trainer_runs(setup)) {
    const bool copies = types.separate_master();
    return {size_of(types.master),
            size_of(types.gradients),
            moments,
            size_of(types.reduce),
            size_of(types.compute),
            size_of(types.master),
            copies ? size_of(types.compute) : 0,
            copies ? size_of(types.master) : 0};
  }
  return {size_of(types.compute),
          size_of(types.gradients),
          (types.separate_master() ? size_of(types.master) : 0) + moments,
          size_of(types.reduce),
          size_of(types.compute),
          size_of(types.compute),
          0,
          0};
}

// Bytes the planner reports, at most an exabyte (no device holds more; a sum of five stays within
// 64 bits): larger ones come from inputs no cluster runs, refused naming what they measure.
constexpr double kMostBytes = 1e18;
std::int64_t bytes_of(double value, const std::string& what) {
  if (!(value >= 0 && value <= kMostBytes)) {
    throw InvalidArgument(what + " would be " + std::to_string(value) +
                          " bytes, more than the exabyte the planner counts to");
  }
  return static_cast<std::int64_t>(std::llround(value));
}

// The mesh axes in device order, the model axis innermost (tensor parallelism inside a node).
struct Axis {
  const char* name;
  std::int64_t size;
  std::int64_t stride;
};

Link link_of(const Cluster& cluster, const Axis& axis) {
  return axis.stride * axis.size > cluster.devices_per_node ? cluster.inter_node
                                                            : cluster.intra_node;
}

// The transformer the planner's model is, as the trainer's chunk assembles it: the family's own
// statement where the manifest came from one; else, read off a file, a gated MLP means the
// Llama's parts (RMSNorm, rotary positions), anything else GPT-2's.
TransformerShape transformer_of(const ModelShape& model) {
  if (model.transformer) return *model.transformer;
  TransformerShape shape;
  const auto size = [](std::int64_t v) {
    return static_cast<std::size_t>(std::max<std::int64_t>(v, 0));
  };
  shape.layers = size(model.layers);
  shape.hidden = size(model.hidden);
  shape.heads = size(model.heads);
  shape.kv_heads = size(model.kv_heads);
  shape.head_dim = size(model.head_dim);
  shape.mlp_width = size(model.ffn);
  shape.vocab = size(model.vocab);
  shape.context = size(model.context);
  shape.norm = model.gated_mlp ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  shape.mlp = model.gated_mlp ? MlpKind::kGatedSilu : MlpKind::kGelu;
  shape.positions = model.gated_mlp ? PositionKind::kRotary : PositionKind::kLearned;
  shape.tied_head = model.tied_embeddings;
  return shape;
}

// The ranks a Mixture of Experts' experts are split over and dispatched among on this layout:
// model x expert (the trainer folds them over the model axis, ParallelContext::experts_group);
// 1 for a dense model. And the axes the trainer counts the dispatch's bytes under.
std::int64_t experts_degree(const ModelShape& model, const Layout& l) {
  return model.transformer && model.transformer->moe() ? l.model * l.expert : 1;
}
std::string experts_axes(const Layout& l) {
  if (l.model > 1 && l.expert > 1) return "model+expert";
  return l.model > 1 ? "model" : "expert";
}

// The activation table of one of the trainer's chunks on this layout.
ActivationTable trainer_table(const ModelShape& model, const TrainingSetup& setup, const Layout& l,
                              std::int64_t layers, bool has_head) {
  ChunkGeometry geometry;
  geometry.batch = static_cast<std::size_t>(setup.micro_batch);
  geometry.seq = static_cast<std::size_t>(setup.seq);
  geometry.model_degree = static_cast<std::size_t>(l.model);
  geometry.expert_degree = static_cast<std::size_t>(experts_degree(model, l));
  geometry.sequence_parallel = l.sequence_parallel;
  geometry.recompute = l.recompute;
  geometry.layers = static_cast<std::size_t>(layers);
  geometry.has_head = has_head;
  geometry.rounded_products = setup.precision == Precision::kBf16;
  geometry.narrow_stream = types_of(setup).stream_narrower();
  return ActivationTable(transformer_of(model), geometry);
}

// The layers of each virtual stage (Layout::stage_layers, or the even split).
std::vector<std::int64_t> virtual_stage_layers(const ModelShape& model, const Layout& l) {
  if (!l.stage_layers.empty()) return l.stage_layers;
  const std::int64_t count = l.pipeline * l.virtual_stages;
  return std::vector<std::int64_t>(static_cast<std::size_t>(count), model.layers / count);
}

// The layers pipeline rank `stage` holds: its virtual stages stage, stage + p, ...
std::int64_t layers_of_stage(const std::vector<std::int64_t>& chunk_layers, const Layout& l,
                             std::int64_t stage) {
  std::int64_t layers = 0;
  for (std::int64_t k = 0; k < l.virtual_stages; ++k) {
    layers += chunk_layers[static_cast<std::size_t>(k * l.pipeline + stage)];
  }
  return layers;
}

// The routed layers (TransformerShape::moe_layer) of virtual stage v, whose layers follow those
// of the virtual stages before it, and of pipeline rank `stage`'s chunks.
std::int64_t routed_layers_of(const ModelShape& model,
                              const std::vector<std::int64_t>& chunk_layers, std::size_t v) {
  std::int64_t first = 0;
  for (std::size_t u = 0; u < v; ++u) first += chunk_layers[u];
  return static_cast<std::int64_t>(transformer_of(model).moe_layers(
      static_cast<std::size_t>(first), static_cast<std::size_t>(first + chunk_layers[v])));
}
std::int64_t routed_layers_of_stage(const ModelShape& model,
                                    const std::vector<std::int64_t>& chunk_layers, const Layout& l,
                                    std::int64_t stage) {
  std::int64_t layers = 0;
  for (std::int64_t k = 0; k < l.virtual_stages; ++k) {
    layers +=
        routed_layers_of(model, chunk_layers, static_cast<std::size_t>(k * l.pipeline + stage));
  }
  return layers;
}

// The most micro-batches each of pipeline rank `stage`'s model chunks holds at once, as the
// schedule's table runs them (one each without a pipeline).
std::vector<std::int64_t> chunk_peaks(const PipelineSchedule* schedule, const Layout& l,
                                      std::int64_t stage) {
  std::vector<std::int64_t> peaks(static_cast<std::size_t>(l.virtual_stages), 1);
  if (schedule == nullptr) return peaks;
  std::vector<std::int64_t> in_flight(peaks.size(), 0);
  std::fill(peaks.begin(), peaks.end(), 0);
  for (const PipelineAction& action : schedule->actions[static_cast<std::size_t>(stage)]) {
    const auto c = static_cast<std::size_t>(action.chunk);
    in_flight[c] += action.pass == Pass::kForward ? 1 : -1;
    peaks[c] = std::max(peaks[c], in_flight[c]);
  }
  return peaks;
}

// Layers' activations pipeline rank `stage` holds at once, in layers of one micro-batch: each
// chunk's micro-batches in flight times its layers.
double held_layer_units(const PipelineSchedule* schedule, const std::vector<std::int64_t>& layers,
                        const Layout& l, std::int64_t stage) {
  const std::vector<std::int64_t> peaks = chunk_peaks(schedule, l, stage);
  double held = 0;
  for (std::size_t c = 0; c < peaks.size(); ++c) {
    held += static_cast<double>(peaks[c]) *
            static_cast<double>(
                layers[c * static_cast<std::size_t>(l.pipeline) + static_cast<std::size_t>(stage)]);
  }
  return held;
}

// What shardwise's trainer keeps on a pipeline stage (or, without a pipeline, a device), in
// bytes: each model chunk's activation table (train's chunk allocates from the same table) with
// as many micro-batches in flight as the schedule's table holds on this stage, the head on the
// last stage's last chunk.
double trainer_stage_activations(const ModelShape& model, const TrainingSetup& setup,
                                 const Layout& l, const PipelineSchedule* schedule,
                                 const std::vector<std::int64_t>& chunk_layers, std::int64_t stage,
                                 bool last) {
  const std::vector<std::int64_t> peaks = chunk_peaks(schedule, l, stage);
  const ElementTypes types = types_of(setup);
  double bytes = 0;
  for (std::size_t c = 0; c < peaks.size(); ++c) {
    const std::int64_t layers =
        chunk_layers[c * static_cast<std::size_t>(l.pipeline) + static_cast<std::size_t>(stage)];
    const bool head = last && c + 1 == peaks.size();
    bytes += static_cast<double>(trainer_table(model, setup, l, layers, head)
                                     .chunk_bytes(static_cast<std::size_t>(peaks[c]), types));
    // Where the experts are dispatched the rows a layer's experts receive are kept outside the
    // table from its forward to its backward (float32: the rows, gate and up, activation,
    // output), as many rows as it routes where the routing is balanced (its model rank's share
    // of the micro-batch's); full recomputation keeps one layer's.
    const TransformerShape shape = transformer_of(model);
    const std::int64_t routed = routed_layers_of(
        model, chunk_layers,
        c * static_cast<std::size_t>(l.pipeline) + static_cast<std::size_t>(stage));
    if (experts_degree(model, l) > 1 && routed > 0) {
      const double rows =
          static_cast<double>(moe_rows(static_cast<std::size_t>(setup.micro_batch * setup.seq),
                                       static_cast<std::size_t>(l.model))) *
          static_cast<double>(shape.experts_per_token);
      const double row = static_cast<double>(2 * shape.hidden + 3 * shape.expert_width) * 4;
      const double held = l.recompute == Recompute::kFull
                              ? 1.0
                              : static_cast<double>(peaks[c]) * static_cast<double>(routed);
      bytes += held * rows * row;
    }
  }
  return bytes;
}

// The elements of a model rank's block `shape` that ZeRO leaves one of `shards` members: FSDP's
// rule with minimum size 1, the trainer's default (train::default_shardings). The rule splits a
// dimension only where the group divides it (JAX's strict layout), so a split parameter's block
// is exactly its elements over the group.
std::int64_t zero_chunk_of(const Shape& shape, std::int64_t shards) {
  const FSDPStrategy fsdp = FSDPStrategy::splitting_every_parameter("fsdp");
  const FsdpDecision decision = fsdp.decide(shape, shards);
  return num_elements(
      NamedSharding(Mesh({"fsdp"}, {shards}), decision.spec, decision.evenness).shard_shape(shape));
}

// One unit of a stage as ZeRO moves it: its elements on this device (after tensor
// parallelism) and one member's chunk of them.
struct ZeroUnit {
  std::int64_t elements = 0;
  std::int64_t widened = 0;  // of elements, those bf16 reads widened (widened_elements)
  std::int64_t chunk = 0;
  // Over an expert axis: of elements and chunk, those every expert rank holds (not experts).
  std::int64_t dense_elements = 0;
  std::int64_t dense_chunk = 0;
  bool layer = false;
  bool tied_embedding = false;
  bool head = false;  // gathered with the head (the final unit, the tied embedding or its copy)
};

// The elements of `unit` a model rank of `degree` reads outside a product, which the trainer's
// bf16 reads as roundings widened to float32 (ParameterStore::compute_float).
std::int64_t widened_elements(const ModelShape::Unit& unit, std::int64_t degree) {
  std::int64_t widened = 0;
  for (std::size_t i = 0; i < unit.read_widened.size(); ++i) {
    if (unit.read_widened[i]) widened += num_elements(unit.block(i, degree));
  }
  return widened;
}

// The units of pipeline rank `stage`: the elements a model rank holds of each, and the chunk
// ZeRO leaves it (zero_chunks for the layout's model degree).
std::vector<ZeroUnit> stage_units(const ModelShape& model, const Layout& l,
                                  const std::vector<std::int64_t>& chunk_layers, std::int64_t stage,
                                  std::int64_t shards, const std::vector<std::int64_t>& chunks) {
  const bool first = stage == 0;
  const bool last = stage == l.pipeline - 1;
  std::vector<ZeroUnit> out;
  std::int64_t layer_index = 0;
  std::size_t virtual_stage = 0;  // of the layer at layer_index
  std::int64_t virtual_stage_end = chunk_layers.empty() ? 0 : chunk_layers[0];
  for (std::size_t u = 0; u < model.units.size(); ++u) {
    const ModelShape::Unit& unit = model.units[u];
    if (unit.layer) {
      const std::int64_t at = layer_index++;
      while (at >= virtual_stage_end && virtual_stage + 1 < chunk_layers.size()) {
        virtual_stage_end += chunk_layers[++virtual_stage];
      }
      if (static_cast<std::int64_t>(virtual_stage) % l.pipeline != stage) continue;
    } else if (u == 0 ? !first : !last) {
      continue;
    }
    ZeroUnit z;
    z.layer = unit.layer;
    // The token embedding serves the head too where the stage also holds the head.
    z.tied_embedding = u == 0 && !unit.layer && model.tied_embeddings && last;
    z.head = z.tied_embedding || (!unit.layer && u + 1 == model.units.size() && u != 0);
    z.elements = unit.elements(l.model, l.expert);
    z.widened = widened_elements(unit, l.model);
    z.chunk = chunks[u];
    z.dense_elements = z.elements - unit.expert_elements(l.model, l.expert);
    z.dense_chunk = z.chunk;
    if (l.expert > 1) {
      for (std::size_t i = 0; i < unit.shapes.size(); ++i) {
        if (unit.is_experts(i))
          z.dense_chunk -= zero_chunk_of(unit.block(i, l.model, l.expert), shards);
      }
    }
    out.push_back(z);
  }
  // A pipeline's last stage computes the head with its own copy of the tied token embedding
  // (its rows of the vocabulary under tensor parallelism), a parameter of that stage like any
  // other: gradients, optimizer state and ZeRO's split (Megatron-LM's embedding group).
  if (last && !first && model.tied_embeddings) {
    const Shape copy{ceil_div(model.vocab, l.model), model.hidden};
    ZeroUnit z;
    z.elements = num_elements(copy);
    z.chunk = zero_chunk_of(copy, shards);
    z.dense_elements = z.elements;
    z.dense_chunk = z.chunk;
    z.head = true;
    out.push_back(z);
  }
  return out;
}

}  // namespace

std::int64_t zero_group(const Layout& layout) {
  if (layout.zero == 0) return 1;
  return layout.fsdp > 1 ? layout.fsdp : layout.data;
}

std::vector<std::int64_t> zero_chunks(const ModelShape& model, std::int64_t shards,
                                      std::int64_t model_degree, std::int64_t expert_degree) {
  // Shapes repeat from layer to layer: each is decided once.
  std::map<Shape, std::int64_t> decided;
  std::vector<std::int64_t> chunks;
  for (const ModelShape::Unit& unit : model.units) {
    std::int64_t chunk = 0;
    for (std::size_t i = 0; i < unit.shapes.size(); ++i) {
      // The block a model rank holds: ZeRO splits it further.
      const Shape shape = unit.block(i, model_degree, expert_degree);
      auto found = decided.find(shape);
      if (found == decided.end())
        found = decided.emplace(shape, zero_chunk_of(shape, shards)).first;
      chunk += found->second;
    }
    chunks.push_back(chunk);
  }
  return chunks;
}

std::int64_t activation_bytes_per_layer(const ModelShape& model, std::int64_t seq,
                                        std::int64_t micro_batch, std::int64_t tensor,
                                        bool sequence_parallel, Recompute recompute) {
  const double s = static_cast<double>(seq);
  const double b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(model.hidden);
  const double a = static_cast<double>(model.heads);
  const double t = static_cast<double>(tensor);
  const double sbh = s * b * h;
  if (recompute == Recompute::kFull) {
    return bytes_of(sequence_parallel ? 2 * sbh / t : 2 * sbh, "one layer's activations");
  }
  // 24: q, k (4), v (2), the output projection's input (2), the MLP's wide output and its
  // activation (8 + 8); scaled to other key/value head counts and MLP widths.
  const double kv = static_cast<double>(model.kv_heads) / a;
  const double wide = static_cast<double>(model.ffn) / (4 * h);
  const double split = 2 + 2 * kv + 2 * kv + 2 + (model.gated_mlp ? 24 : 16) * wide;
  // 10: the LayerNorms' inputs (4), the QKV and MLP inputs (4), two dropout masks (2).
  const double unsplit = 10;
  const double scores = recompute == Recompute::kSelective ? 0.0 : 5 * a * s / h;
  const double per_sbh =
      sequence_parallel ? (unsplit + split + scores) / t : unsplit + split / t + scores / t;
  return bytes_of(sbh * per_sbh, "one layer's activations");
}

double model_flops(const ModelShape& model, std::int64_t tokens, std::int64_t seq) {
  const double T = static_cast<double>(tokens);
  const double attention = static_cast<double>(model.heads * model.head_dim);
  return 6 * T * static_cast<double>(model.matmul_parameters) +
         12 * static_cast<double>(model.layers) * static_cast<double>(seq) * attention * T;
}

double hardware_flops(const ModelShape& model, std::int64_t tokens, std::int64_t seq,
                      Recompute recompute) {
  const double T = static_cast<double>(tokens);
  const double attention = 4 * static_cast<double>(model.layers) * static_cast<double>(seq) *
                           static_cast<double>(model.heads * model.head_dim) * T;
  double flops = model_flops(model, tokens, seq);
  if (recompute == Recompute::kSelective) flops += attention;
  if (recompute == Recompute::kFull) {
    flops += 2 * T * static_cast<double>(model.layers * model.layer_matmul_parameters) + attention;
  }
  return flops;
}

std::optional<std::string> layout_problem(const ModelShape& model, const Cluster& cluster,
                                          const TrainingSetup& setup, const Layout& l) {
  for (const auto& [value, name] : {std::pair{l.data, "data"},
                                    {l.fsdp, "fsdp"},
                                    {l.expert, "expert"},
                                    {l.model, "model"},
                                    {l.pipeline, "pipeline"},
                                    {l.microbatches, "microbatches"},
                                    {l.virtual_stages, "virtual stages"}}) {
    if (value < 1) return std::string(name) + " is " + std::to_string(value) + "; at least 1";
  }
  if (l.devices() != cluster.devices) {
    return "data x fsdp x expert x model x pipeline = " + std::to_string(l.devices()) +
           ", not the " + std::to_string(cluster.devices) + " devices";
  }
  if (l.zero < 0 || l.zero > 3) return "zero " + std::to_string(l.zero) + " is not 0 to 3";
  if (l.fsdp > 1 && l.zero == 0) return "an fsdp axis shards: zero 1, 2 or 3";
  const bool moe = model.transformer && model.transformer->moe();
  if (l.expert > 1 && !moe) {
    return "expert " + std::to_string(l.expert) +
           ": the model has no experts to split (the expert axis splits a Mixture of Experts' "
           "experts)";
  }
  if (l.expert > 1 && model.transformer->experts % static_cast<std::size_t>(l.expert) != 0) {
    return "expert " + std::to_string(l.expert) + " does not divide the " +
           std::to_string(model.transformer->experts) + " experts";
  }
  if (moe && l.model > 1 &&
      model.transformer->experts % static_cast<std::size_t>(l.model * l.expert) != 0) {
    // As the trainer: the experts are folded over the model axis, whole.
    return "model x expert = " + std::to_string(l.model * l.expert) + " does not divide the " +
           std::to_string(model.transformer->experts) +
           " experts (they are split over the model axis too)";
  }
  if (l.pipeline > 1 && moe && model.transformer->aux_loss) {
    return "pipeline " + std::to_string(l.pipeline) +
           ": the auxiliary load-balancing loss couples every layer's routing of a micro-batch";
  }
  if (model.heads % l.model != 0 ||
      (model.kv_heads % l.model != 0 && !model.replicates_kv_heads(l.model))) {
    return "model " + std::to_string(l.model) + " does not divide the " +
           std::to_string(model.heads) + " heads (" + std::to_string(model.kv_heads) +
           " key/value, which it may also be a multiple of)";
  }
  if (model.vocab % l.model != 0) {
    return "model " + std::to_string(l.model) + " does not divide the vocabulary " +
           std::to_string(model.vocab) + " (the embedding and head are split by vocabulary)";
  }
  if (model.ffn % l.model != 0) {
    return "model " + std::to_string(l.model) + " does not divide the MLP width " +
           std::to_string(model.ffn);
  }
  if (!l.stage_layers.empty()) {
    if (static_cast<std::int64_t>(l.stage_layers.size()) != l.pipeline * l.virtual_stages) {
      return std::to_string(l.stage_layers.size()) +
             " stage layer counts for pipeline x virtual "
             "stages = " +
             std::to_string(l.pipeline * l.virtual_stages);
    }
    std::int64_t sum = 0;
    for (const std::int64_t n : l.stage_layers) {
      if (n < 1 || n > model.layers) return "a virtual stage of " + std::to_string(n) + " layers";
      sum += n;
    }
    if (sum != model.layers) {
      return "the stages' layers add up to " + std::to_string(sum) + ", not the model's " +
             std::to_string(model.layers);
    }
  } else if (model.layers % (l.pipeline * l.virtual_stages) != 0) {
    return "pipeline x virtual stages = " + std::to_string(l.pipeline * l.virtual_stages) +
           " does not divide the " + std::to_string(model.layers) +
           " layers (an uneven split names each stage's layers)";
  }
  const std::int64_t per_step = l.data_parallel() * setup.micro_batch;
  if (setup.global_batch % per_step != 0 || setup.global_batch / per_step != l.microbatches) {
    return "global batch " + std::to_string(setup.global_batch) + " is not " +
           std::to_string(l.microbatches) + " micro-batches of " +
           std::to_string(setup.micro_batch) + " on each of " + std::to_string(l.data_parallel()) +
           " data-parallel ranks";
  }
  if (l.schedule == ScheduleKind::kInterleaved1F1B) {
    if (l.pipeline == 1 || l.virtual_stages < 2) {
      return "the interleaved schedule needs pipeline > 1 and virtual stages >= 2";
    }
    if (l.microbatches % l.pipeline != 0) {
      return "the interleaved schedule needs micro-batches (" + std::to_string(l.microbatches) +
             ") divisible by pipeline (" + std::to_string(l.pipeline) + ")";
    }
  } else if (l.virtual_stages != 1) {
    return "virtual stages need the interleaved schedule";
  }
  if (l.sequence_parallel && setup.seq % l.model != 0) {
    return "sequence parallel needs seq " + std::to_string(setup.seq) + " divisible by model " +
           std::to_string(l.model);
  }
  return std::nullopt;
}

Prediction evaluate(const ModelShape& model, const Cluster& cluster, const TrainingSetup& setup,
                    const Layout& l) {
  return evaluate(model, cluster, setup, l, zero_chunks(model, zero_group(l), l.model, l.expert));
}

// What one device of pipeline stage `stage` holds: its units' state after ZeRO, its
// activations as the schedule keeps them, and ZeRO-3's gathered buffers.
MemoryPerDevice stage_memory(const ModelShape& model, const TrainingSetup& setup, const Layout& l,
                             const StateBytes& bytes, const std::vector<std::int64_t>& chunk_layers,
                             const std::vector<ZeroUnit>& units, const PipelineSchedule* schedule,
                             std::int64_t stage) {
  const bool first = stage == 0;
  const bool last = stage == l.pipeline - 1;
  const std::int64_t per_stage_layers = layers_of_stage(chunk_layers, l, 0);  // the first's
  std::int64_t elements = 0;
  std::int64_t sharded = 0;
  std::int64_t widened = 0;
  for (const ZeroUnit& unit : units) {
    elements += unit.elements;
    sharded += unit.chunk;
    widened += unit.widened;
  }
  MemoryPerDevice m;
  const auto state = [&](std::int64_t per_parameter, std::int64_t count) {
    return bytes_of(static_cast<double>(per_parameter) * static_cast<double>(count),
                    "the model state on a device");
  };
  m.params = state(bytes.params, l.zero >= 3 ? sharded : elements);
  m.grads = state(bytes.grads, l.zero >= 2 ? sharded : elements);
  // shardwise's trainer reduce-scatters ZeRO-2's gradients after a full-buffer backward: it
  // holds both.
  if (trainer_runs(setup) && l.zero == 2) {
    m.grads = state(bytes.grads, sharded + elements);
  }
  m.optimizer = state(bytes.optimizer, l.zero >= 1 ? sharded : elements);
  // The computation's copies (the trainer's bf16): every parameter's rounding and the widened
  // ones, made once a step and kept; under ZeRO-3 a unit's live while it is gathered, the
  // layers one at a time and the head's units together.
  if (l.zero < 3) {
    m.compute_copies = state(bytes.copy, elements) + state(bytes.widened, widened);
  } else {
    std::int64_t head = 0;
    for (const ZeroUnit& unit : units) {
      const std::int64_t copies =
          state(bytes.copy, unit.elements) + state(bytes.widened, unit.widened);
      m.compute_copies = std::max(m.compute_copies, copies);
      if (unit.head) head += copies;
    }
    m.compute_copies = std::max(m.compute_copies, head);
  }
  const std::int64_t b = setup.micro_batch;
  if (trainer_runs(setup)) {
    // shardwise's own trainer, counted as it allocates (the agreement test holds the two equal
    // for every layout it runs). Under full recomputation a layer keeps its output: this
    // rank's rows of the stream.
    const ElementTypes types = types_of(setup);
    const ActivationTable layer = trainer_table(model, setup, l, 1, false);
    m.activations_per_layer =
        bytes_of(static_cast<double>(l.recompute == Recompute::kFull
                                         ? layer.bytes(Activation::kLayerOutput, types)
                                         : layer.layer_bytes(types)),
                 "one layer's activations");
    m.activations =
        bytes_of(trainer_stage_activations(model, setup, l, schedule, chunk_layers, stage, last),
                 "the activations on a device");
  } else {
    m.activations_per_layer =
        activation_bytes_per_layer(model, setup.seq, b, l.model, l.sequence_parallel, l.recompute);
    // Micro-batches whose activations a first stage holds at once (Korthikanti et al. 2022,
    // section 4.2.3): all m with GPipe, p with 1F1B, and with V interleaved chunks the layers
    // of 1 + (p - 1) / (p V) models.
    double layers_held = static_cast<double>(per_stage_layers);
    if (l.pipeline > 1) {
      const double p_stages = static_cast<double>(l.pipeline);
      const double in_flight = static_cast<double>(std::min(l.pipeline, l.microbatches));
      if (l.schedule == ScheduleKind::kGPipe) {
        layers_held *= static_cast<double>(l.microbatches);
      } else if (l.schedule == ScheduleKind::kOneFOneB) {
        layers_held *= in_flight;
      } else {
        layers_held = static_cast<double>(model.layers) *
                      (1 + (p_stages - 1) / (p_stages * static_cast<double>(l.virtual_stages)));
      }
    }
    // Later stages, and an uneven split's first: what the schedule keeps in flight there.
    if (!first || !l.stage_layers.empty()) {
      layers_held = held_layer_units(schedule, chunk_layers, l, stage);
    }
    m.activations = bytes_of(layers_held * static_cast<double>(m.activations_per_layer),
                             "the activations on a device");
    if (l.recompute == Recompute::kFull) {  // one layer recomputed at a time
      m.activations =
          bytes_of(static_cast<double>(m.activations) +
                       static_cast<double>(activation_bytes_per_layer(
                           model, setup.seq, b, l.model, l.sequence_parallel, Recompute::kNone)),
                   "the activations on a device");
    }
  }
  if (l.zero == 3) {  // the layer in use and the next, gathered, and one layer's gradients
    const std::int64_t layer = ceil_div(model.layer_parameters, l.model);
    m.buffers = state(2 * bytes.params + bytes.grads, layer);
  }
  return m;
}

// Bytes per step along each axis (and of each kind, and ring steps for latency), sent by the
// first device of the first stage, collective by collective as shardwise's trainer issues
// them: gradients unit by unit, the loss averaged and the gradient norm summed once.
struct Traffic {
  std::map<std::string, double> sent;
  std::map<std::string, double> by_kind;
  std::map<std::string, double> steps;
};

Traffic step_traffic(const ModelShape& model, const TrainingSetup& setup, const Layout& l,
                     const StateBytes& bytes, const std::vector<ZeroUnit>& first_stage,
                     std::int64_t stage_elements, std::int64_t per_stage_layers,
                     std::int64_t routed_layers, std::int64_t shards, std::int64_t replicas) {
  Traffic traffic;
  std::map<std::string, double>& sent = traffic.sent;
  std::map<std::string, double>& by_kind = traffic.by_kind;
  std::map<std::string, double>& steps = traffic.steps;
  const double m = static_cast<double>(l.microbatches);
  const std::string shard_axis = l.fsdp > 1 ? "fsdp" : "data";
  const auto add = [&](const std::string& axis, const char* kind, double value, double ring_steps) {
    if (value <= 0) return;
    sent[axis] += value;
    by_kind[kind] += value;
    steps[axis] += ring_steps;
  };
  // Member 0 of n sends 2 (count - its chunk) of an all-reduce, its chunk floor(count / n).
  const auto all_reduce = [&](const std::string& axis, std::int64_t n, double count, double element,
                              double times) {
    if (n < 2) return;
    const double chunk = std::floor(count / static_cast<double>(n));
    add(axis, "all_reduce", times * 2.0 * (count - chunk) * element,
        times * 2.0 * static_cast<double>(n - 1));
  };
  // An all-gather or reduce-scatter of `chunk` elements per member: n - 1 chunks.
  const auto gather = [&](const std::string& axis, const char* kind, std::int64_t n,
                          std::int64_t chunk, double element, double times) {
    if (n < 2) return;
    add(axis, kind, times * static_cast<double>(n - 1) * static_cast<double>(chunk) * element,
        times * static_cast<double>(n - 1));
  };
  // Gradients move in the type they are reduced in, parameters in the type ZeRO-3 gathers them
  // in (the type the computation reads) or ZeRO 1 and 2 gather the updated ones in; a pass's share
  // of a parameter's gradient is summed in the gradients' type, and the loss and the
  // cross-entropy's row statistics are float32, the norm a double.
  const ElementTypes types = types_of(setup);
  const double grad = static_cast<double>(bytes.reduced);
  const double gathered = static_cast<double>(bytes.gathered);
  const double regathered = static_cast<double>(bytes.regathered);
  const double grad_share = static_cast<double>(size_of(types.gradients));
  const double statistic = static_cast<double>(size_of(types.statistics));
  const std::string group_axis = l.zero == 0 ? "data" : shard_axis;
  const std::int64_t group = l.zero == 0 ? l.data : shards;
  double slice = 0;
  for (const ZeroUnit& unit : first_stage) {
    slice += static_cast<double>(unit.chunk);
    if (l.zero <= 1) {
      all_reduce(group_axis, group, static_cast<double>(unit.elements), grad, 1);
    } else {
      // Once a step: a unit's gradients add up over the micro-batches first.
      gather(shard_axis, "reduce_scatter", shards, unit.chunk, grad, 1);
    }
    if (l.zero == 1 || l.zero == 2) {
      gather(shard_axis, "all_gather", shards, unit.chunk, regathered, 1);
    }
    if (l.zero == 3) {  // layers forward and again backward; the tied embedding for the head too
      const double uses = unit.layer ? 2 : (unit.tied_embedding ? 2 : 1);
      gather(shard_axis, "all_gather", shards, unit.chunk, gathered, uses * m);
    }
  }
  if (replicas > 1) {
    all_reduce("data", replicas, l.zero == 1 ? static_cast<double>(stage_elements) : slice, grad,
               1);
  }
  all_reduce(group_axis, group, 1, statistic, 1);  // the loss, averaged
  all_reduce("data", replicas, 1, statistic, 1);
  all_reduce(group_axis, group, 1, 8, 1);  // the squared gradient norm, in double
  // The auxiliary loss's statistics, summed over each of the batch's axes once a forward (a
  // layout with it has no pipeline: one forward a step).
  if (const TransformerShape shape = transformer_of(model); shape.aux_loss) {
    const double statistics = 2 * static_cast<double>(shape.experts);
    all_reduce("data", l.data, statistics, 8, 1);
    all_reduce("fsdp", l.fsdp, statistics, 8, 1);
    all_reduce("expert", l.expert, statistics, 8, 1);
    all_reduce("model", l.model, statistics, 8, 1);  // each model rank routes a share
  }
  // The expert bias' choice counts of this rank's layers, summed once a step in one message.
  if (const TransformerShape shape = transformer_of(model); shape.moe() && setup.expert_bias) {
    const double counts =
        static_cast<double>(per_stage_layers) * static_cast<double>(shape.experts);
    for (const auto& [axis, n] : {std::pair<std::string, std::int64_t>{"data", l.data},
                                  {"fsdp", l.fsdp},
                                  {"expert", l.expert},
                                  {"model", l.model}}) {
      all_reduce(axis, n, counts, 8, 1);
    }
  }
  if (l.expert > 1) {
    // Over the expert axis: what every expert rank holds, averaged once a step in one message
    // (each rank's whole gradients, or its slices from ZeRO 2 on); the loss and the norm.
    double dense = 0;
    for (const ZeroUnit& unit : first_stage) {
      dense += static_cast<double>(l.zero >= 2 ? unit.dense_chunk : unit.dense_elements);
    }
    all_reduce("expert", l.expert, dense, grad, 1);
    all_reduce("expert", l.expert, 1, statistic, 1);
    all_reduce("expert", l.expert, 1, 8, 1);
  }
  if (const std::int64_t g = experts_degree(model, l); g > 1) {
    // Each layer's dispatch per micro-batch over the model x expert ranks: an all-to-all of
    // every expert's row count, then its rows to the ranks holding their experts and their
    // outputs back (float32), and backward the outputs' gradients there and the inputs' back; a
    // recomputed forward runs them again. Each rank routes its model rank's share of the rows;
    // as many go to each rank's experts as the routing is balanced: (g - 1) / g leave.
    const TransformerShape shape = transformer_of(model);
    const double routed =
        static_cast<double>(moe_rows(static_cast<std::size_t>(setup.micro_batch * setup.seq),
                                     static_cast<std::size_t>(l.model))) *
        static_cast<double>(shape.experts_per_token);
    const double others = static_cast<double>(g - 1);
    const double away = routed * others / static_cast<double>(g);
    const double row = static_cast<double>(shape.hidden) * 4;
    const double forwards = l.recompute == Recompute::kFull ? 2 : 1;
    // (The routed layers only: a dense layer among them dispatches nothing.)
    const double times = static_cast<double>(routed_layers) * m;
    const double counts = static_cast<double>(shape.experts / static_cast<std::size_t>(g));
    const std::string axes = experts_axes(l);
    add(axes, "all_to_all", times * forwards * others * counts * 8, times * forwards * others);
    add(axes, "all_to_all", times * (2 * forwards + 2) * away * row,
        times * (2 * forwards + 2) * others);
    // Over the model axis the router, whole on every rank, gets each rank's share of its
    // gradient summed, once a layer's backward (its output and input cross the axis as a dense
    // MLP's do, below).
    all_reduce("model", l.model,
               static_cast<double>(shape.experts) * static_cast<double>(shape.hidden), grad_share,
               times);
  }
  // Activations and their gradients over the model axis and between stages.
  const double message = static_cast<double>(size_of(types.messages));
  const double micro_batch_activation = static_cast<double>(setup.micro_batch) *
                                        static_cast<double>(setup.seq) *
                                        static_cast<double>(model.hidden);
  const double rows = static_cast<double>(setup.micro_batch) * static_cast<double>(setup.seq);
  const double layers = static_cast<double>(per_stage_layers);
  // The sums a layer's backward issues over the model axis, sized by the chunk's own table: a
  // norm's parameter vectors under sequence parallelism (LayerNorm's weight and bias, RMSNorm's
  // weight), the projections' (and biases') gradients of replicated key/value heads over the
  // model / kv_heads ranks holding each, and the norms of queries and keys over every rank.
  const ActivationTable layer_table = trainer_table(model, setup, l, 1, false);
  const double norm_vector = static_cast<double>(transformer_of(model).norm_parameters()) *
                             static_cast<double>(model.hidden);
  if (const auto kv = layer_table.elements(Activation::kKvHeadGrads); kv > 0) {
    all_reduce("model", l.model / model.kv_heads, static_cast<double>(kv), grad_share, layers * m);
  }
  if (const auto qk = layer_table.elements(Activation::kQkNormGrads); qk > 0) {
    all_reduce("model", l.model, static_cast<double>(qk), grad_share, layers * m);
  }
  if (l.model > 1 && l.sequence_parallel) {
    // Korthikanti et al.: each layer's two all-reduces forward and two backward become an
    // all-gather along the sequence and a reduce-scatter each (a recomputed layer's forward
    // runs them again), of a 1/t chunk of the layer's activation; the LayerNorms' parameter
    // gradients, computed from each rank's positions, are summed over the axis (two vectors of h
    // each).
    const auto chunk =
        static_cast<std::int64_t>(micro_batch_activation / static_cast<double>(l.model));
    const double per_layer = l.recompute == Recompute::kFull ? 6 : 4;  // of each kind
    gather("model", "all_gather", l.model, chunk, message, per_layer * layers * m);
    gather("model", "reduce_scatter", l.model, chunk, message, per_layer * layers * m);
    all_reduce("model", l.model, norm_vector, grad_share, 2 * layers * m);
    // The embedding's lookups scattered and the residual stream's gradient gathered for its
    // rows; the position embedding's gradient summed; the final norm's output gathered for the
    // head, its gradient scattered, its parameters' gradients summed (one stage: all of it).
    gather("model", "reduce_scatter", l.model, chunk, message, m);
    gather("model", "all_gather", l.model, chunk, message, m);
    if (model.context > 0) {  // learned positions
      all_reduce("model", l.model, static_cast<double>(setup.seq * model.hidden), grad_share, m);
    }
    if (l.pipeline == 1) {
      gather("model", "all_gather", l.model, chunk, message, m);
      gather("model", "reduce_scatter", l.model, chunk, message, m);
      all_reduce("model", l.model, norm_vector, grad_share, m);
      // The cross-entropy's all-reduces run again in backward, which computes the head's
      // logits block by block anew.
      all_reduce("model", l.model, rows, statistic, 2 * m);
      all_reduce("model", l.model, 2 * rows, statistic, 2 * m);
    }
    all_reduce("model", l.model, 1, 8, 1);
  } else if (l.model > 1) {  // Megatron: two all-reduces per layer forward, two backward
    const double per_layer = l.recompute == Recompute::kFull ? 6 : 4;
    all_reduce("model", l.model, micro_batch_activation, message,
               per_layer * static_cast<double>(per_stage_layers) * m);
    // The vocabulary-parallel embedding's lookups forward and the head's input gradient
    // backward, and the cross-entropy's largest logit and its two sums (sum of exponentials,
    // the target's logit) per row, in fp32; the first stage holds the embedding, the last the
    // head (one stage: both). The squared gradient norm is summed over the axis too.
    all_reduce("model", l.model, micro_batch_activation, message, m);
    if (l.pipeline == 1) {
      all_reduce("model", l.model, micro_batch_activation, message, m);
      // The cross-entropy's all-reduces run again in backward, which computes the head's
      // logits block by block anew.
      all_reduce("model", l.model, rows, statistic, 2 * m);
      all_reduce("model", l.model, 2 * rows, statistic, 2 * m);
    }
    all_reduce("model", l.model, 1, 8, 1);
  }
  if (l.pipeline > 1) {
    // Per micro-batch, each of the first stage's V chunks sends its activations forward and
    // each but the first (virtual stage 0) its input's gradient backward.
    const double chunk = message * micro_batch_activation /
                         (l.sequence_parallel ? static_cast<double>(l.model) : 1.0);
    const double messages = m * static_cast<double>(2 * l.virtual_stages - 1);
    add("pipeline", "send", messages * chunk, messages);
    // The tied token embedding's gradient, summed between the first and the last stage
    // (Megatron-LM's embedding group): this rank's rows of the vocabulary.
    if (model.tied_embeddings) {
      all_reduce(
          "pipeline", 2,
          static_cast<double>(ceil_div(model.vocab, l.model)) * static_cast<double>(model.hidden),
          grad, 1);
    }
    // The loss, from the last stage to every stage, and the gradient norm, both in double.
    all_reduce("pipeline", l.pipeline, 1, 8, 1);
    all_reduce("pipeline", l.pipeline, 1, 8, 1);
  }
  return traffic;
}

Prediction evaluate(const ModelShape& model, const Cluster& cluster, const TrainingSetup& setup,
                    const Layout& l, const std::vector<std::int64_t>& chunks) {
  if (const auto problem = layout_problem(model, cluster, setup, l)) {
    throw InvalidArgument("layout " + l.to_string() + ": " + *problem);
  }
  if (!(setup.compute_efficiency >= TrainingSetup::kLeastEfficiency &&
        setup.compute_efficiency <= 1)) {
    throw InvalidArgument("the compute efficiency is " + std::to_string(setup.compute_efficiency) +
                          "; expected " + std::to_string(TrainingSetup::kLeastEfficiency) +
                          " to 1");
  }
  if (!(setup.overlap >= 0 && setup.overlap <= 1)) {
    throw InvalidArgument("the overlap is " + std::to_string(setup.overlap) + "; expected 0 to 1");
  }
  if (model.units.empty() || chunks.size() != model.units.size()) {
    throw InvalidArgument("the model shape lists " + std::to_string(model.units.size()) +
                          " units and " + std::to_string(chunks.size()) +
                          " chunks (shape_of and zero_chunks fill them)");
  }
  Prediction p;
  p.layout = l;
  const StateBytes bytes = state_bytes(setup);
  const std::int64_t shards = l.zero == 0 ? 1 : (l.fsdp > 1 ? l.fsdp : l.data);
  const std::int64_t replicas = l.zero == 0 ? 1 : (l.fsdp > 1 ? l.data : 1);
  const std::vector<std::int64_t> chunk_layers = virtual_stage_layers(model, l);
  const std::int64_t per_stage_layers = layers_of_stage(chunk_layers, l, 0);  // the first's
  std::optional<PipelineSchedule> schedule;
  if (l.pipeline > 1) {
    schedule = build_schedule(l.schedule, l.pipeline, l.microbatches, l.virtual_stages);
  }

  // Every pipeline stage; the most loaded one is reported.
  MemoryPerDevice best;
  std::int64_t stage_elements = 0;
  std::vector<ZeroUnit> first_stage;
  std::int64_t most_layers = 0;  // on one stage
  for (std::int64_t stage = 0; stage < l.pipeline; ++stage) {
    const bool first = stage == 0;
    const std::int64_t stage_layers = layers_of_stage(chunk_layers, l, stage);
    most_layers = std::max(most_layers, stage_layers);
    const std::vector<ZeroUnit> units = stage_units(model, l, chunk_layers, stage, shards, chunks);
    std::int64_t elements = 0;
    for (const ZeroUnit& unit : units) elements += unit.elements;
    const MemoryPerDevice m = stage_memory(model, setup, l, bytes, chunk_layers, units,
                                           schedule ? &*schedule : nullptr, stage);
    p.memory_by_stage.push_back(m);
    if (first || m.total() > best.total()) best = m;
    if (first) {
      stage_elements = elements;
      first_stage = units;
    }
  }
  p.memory = best;
  p.fits = best.total() <= cluster.memory_bytes;

  const Traffic traffic =
      step_traffic(model, setup, l, bytes, first_stage, stage_elements, per_stage_layers,
                   routed_layers_of_stage(model, chunk_layers, l, 0), shards, replicas);
  const std::map<std::string, double>& sent = traffic.sent;
  const double m = static_cast<double>(l.microbatches);
  for (const auto& [kind, value] : traffic.by_kind) {
    p.comm_bytes_per_kind[kind] = bytes_of(value, std::string("the bytes sent by ") + kind);
  }
  for (const auto& [axis, value] : sent) {
    p.comm_bytes_per_step[axis] = bytes_of(value, "the bytes sent along " + axis);
  }

  // Time.
  const std::int64_t tokens = setup.global_batch * setup.seq;
  p.model_flops_per_step = model_flops(model, tokens, setup.seq);
  p.hardware_flops_per_step = hardware_flops(model, tokens, setup.seq, l.recompute);
  // The products run at the peak of the type they read.
  const double peak =
      types_of(setup).compute == DType::kF32 ? cluster.peak_flops_fp32 : cluster.peak_flops_bf16;
  // The slowest stage sets the pace: an uneven split's most loaded stage, in layers.
  const double imbalance =
      static_cast<double>(most_layers * l.pipeline) / static_cast<double>(model.layers);
  p.compute_time_s = p.hardware_flops_per_step * std::max(1.0, imbalance) /
                     (static_cast<double>(cluster.devices) * peak * setup.compute_efficiency);
  if (l.pipeline > 1) {
    p.bubble_fraction =
        static_cast<double>(l.pipeline - 1) / (static_cast<double>(l.virtual_stages) * m);
  }
  p.bubble_time_s = p.compute_time_s * p.bubble_fraction;
  const Axis axes[] = {{"model", l.model, 1},
                       {"expert", l.expert, l.model},
                       {"fsdp", l.fsdp, l.model * l.expert},
                       {"data", l.data, l.model * l.expert * l.fsdp},
                       {"pipeline", l.pipeline, l.model * l.expert * l.fsdp * l.data}};
  for (const Axis& axis : axes) {
    const auto it = sent.find(axis.name);
    if (it == sent.end()) continue;
    const Link link = link_of(cluster, axis);
    double time = it->second / link.bandwidth + traffic.steps.at(axis.name) * link.latency;
    const bool hidden = std::string(axis.name) == "data" || std::string(axis.name) == "fsdp";
    if (hidden) time *= 1 - setup.overlap;
    p.comm_time_s += time;
  }
  p.step_time_s = p.compute_time_s + p.bubble_time_s + p.comm_time_s;
  p.mfu = p.model_flops_per_step / (p.step_time_s * static_cast<double>(cluster.devices) * peak);
  // The inputs' bounds keep every figure finite; a prediction that is not is never reported.
  if (!std::isfinite(p.step_time_s) || !std::isfinite(p.mfu) || !(p.step_time_s > 0)) {
    throw InvalidArgument("layout " + l.to_string() + ": the predicted step time is " +
                          std::to_string(p.step_time_s) +
                          " s, not a positive finite number (the model, cluster or setup is out "
                          "of range)");
  }
  return p;
}

}  // namespace shardwise::plan
