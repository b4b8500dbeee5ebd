#include "shardwise/train/distributed_model.hpp"
#include "shardwise/core/element_type.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/moe_router.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/scheduled_chunk.hpp"

namespace shardwise::train {
namespace {

std::vector<PartitionSpec> placements_of(const ModelDefinition& definition, const Mesh& mesh,
                                         const ModelLayout& layout) {
  const int degree = model_degree(mesh);
  const int experts = expert_degree(mesh);
  if (layout.placements.empty()) return fixed_placements(definition, degree, experts);
  check_model_placements(definition, degree, experts, layout.placements);
  return layout.placements;
}

std::int64_t stages_of(const Mesh& mesh) {
  return mesh.has_axis(kPipelineAxis) ? mesh.axis_size(kPipelineAxis) : 1;
}

std::int64_t stage_of(const Mesh& mesh, std::int64_t rank) {
  return mesh.has_axis(kPipelineAxis) ? mesh.coords_at(rank)[mesh.axis_index(kPipelineAxis)] : 0;
}

// The pipeline ranks whose chunks read each parameter, by name.
std::map<std::string, std::set<int>> holders(const ModelDefinition& definition,
                                             const PipelineLayout& pipeline, std::int64_t stages) {
  std::map<std::string, std::set<int>> held;
  for (std::int64_t s = 0; s < stages; ++s) {
    for (const LayerRange& range : stage_chunks(definition.layers(), pipeline, stages, s)) {
      for (const std::string& name : definition.chunk_parameters(range)) {
        held[name].insert(static_cast<int>(s));
      }
    }
  }
  return held;
}

}  // namespace

std::vector<ParameterSpec> rank_parameters(const ModelDefinition& definition, const Mesh& mesh,
                                           std::int64_t rank, const ModelLayout& layout) {
  std::vector<ParameterSpec> local =
      local_parameters(definition.parameters(), mesh, rank, placements_of(definition, mesh, layout),
                       definition.shared_rows(model_degree(mesh)));
  if (!layout.pipeline) return local;
  const std::int64_t stages = stages_of(mesh);
  const int stage = static_cast<int>(stage_of(mesh, rank));
  const std::map<std::string, std::set<int>> held = holders(definition, *layout.pipeline, stages);
  std::vector<ParameterSpec> mine;
  for (ParameterSpec& spec : local) {
    const auto it = held.find(spec.name);
    if (it == held.end() || it->second.count(stage) == 0) continue;
    spec.tied_copy = *it->second.begin() != stage;
    mine.push_back(std::move(spec));
  }
  return mine;
}

DistributedModel::DistributedModel(std::shared_ptr<const ModelDefinition> definition,
                                   std::uint64_t seed, Precision precision, DType residual_dtype,
                                   double capacity_factor, double expert_bias_rate)
    : definition_(std::move(definition)), store_(definition_->parameters()) {
  layout_.precision = precision;
  layout_.residual_dtype = residual_dtype;
  layout_.capacity_factor = capacity_factor;
  layout_.expert_bias_rate = expert_bias_rate;
  ChunkOptions options;
  options.range = {0, definition_->layers()};
  options.precision = precision;
  options.residual_dtype = residual_dtype;
  options.capacity_factor = capacity_factor;
  options.expert_bias_rate = expert_bias_rate;
  ranges_.push_back(options.range);
  chunks_.push_back(definition_->build_chunk(store_, options));
  store_.initialize_on_use(seed);
}

DistributedModel::DistributedModel(std::shared_ptr<const ModelDefinition> definition,
                                   std::uint64_t seed, const ParallelContext& context,
                                   ModelLayout layout)
    : definition_(std::move(definition)),
      context_(&context),
      layout_(std::move(layout)),
      store_(rank_parameters(*definition_, context.mesh(), context.rank(), layout_)) {
  definition_->check_options(layout_.sequence_parallel, layout_.recompute, "the layout");
  const std::int64_t stages = context.degree(kPipelineAxis);
  std::vector<LayerRange> ranges{{0, definition_->layers()}};
  if (layout_.pipeline) {
    const PipelineLayout& p = *layout_.pipeline;
    schedule_ = build_schedule(p.schedule, stages, p.microbatches, p.virtual_stages);
    // Validation runs the schedule's forwards only, in its order.
    forward_schedule_ = schedule_;
    for (auto& actions : forward_schedule_->actions) {
      std::erase_if(actions, [](const PipelineAction& a) { return a.pass == Pass::kBackward; });
    }
    ranges = stage_chunks(definition_->layers(), p, stages, context.coordinate(kPipelineAxis));
    for (const auto& [name, ranks] : holders(*definition_, p, stages)) {
      if (ranks.size() < 2 || ranks.count(context.coordinate(kPipelineAxis)) == 0) continue;
      tied_.push_back({store_.index_of(name), {ranks.begin(), ranks.end()}});
    }
    // Every rank of a group sums in one order: the parameters'.
    std::sort(tied_.begin(), tied_.end(),
              [](const TiedGroup& a, const TiedGroup& b) { return a.parameter < b.parameter; });
  }
  for (const LayerRange& range : ranges) {
    ChunkOptions options;
    options.range = range;
    options.tensor_parallel = TensorParallel(context);
    options.expert_parallel = ExpertParallel(context);
    options.sum_over_batch = [this](double* values, std::size_t count) {
      sum_over_batch(values, count);
    };
    options.batch_ranks = static_cast<std::size_t>(context.data_parallel_size());
    options.capacity_factor = layout_.capacity_factor;
    options.expert_bias_rate = layout_.expert_bias_rate;
    ranges_.push_back(range);
    options.sequence_parallel = layout_.sequence_parallel;
    options.recompute = layout_.recompute;
    options.precision = layout_.precision;
    options.residual_dtype = layout_.residual_dtype;
    chunks_.push_back(definition_->build_chunk(store_, options));
  }
  // Drawn when first used: a ZeRO-3 trainer draws only this rank's slices.
  store_.initialize_on_use(seed);
}

DistributedModel::~DistributedModel() = default;

void DistributedModel::sum_over_batch(double* values, std::size_t count) const {
  if (context_ == nullptr) return;
  // The batch's rows lie over data x fsdp x expert, and a Mixture of Experts routes a share of
  // each micro-batch's on each model rank.
  for (const std::string_view axis : {kDataAxis, kFsdpAxis, kExpertAxis, kModelAxis}) {
    if (context_->degree(axis) > 1) {
      context_->communicator(axis).all_reduce(values, values, count, DType::kF64, ReduceOp::kSum,
                                              context_->group(axis));
    }
  }
}

void DistributedModel::end_step() {
  if (layout_.expert_bias_rate <= 0) return;
  std::vector<double> counts;
  for (const auto& chunk : chunks_) {
    const std::span<double> mine = chunk->expert_counts();
    counts.insert(counts.end(), mine.begin(), mine.end());
  }
  sum_over_batch(counts.data(), counts.size());
  std::size_t at = 0;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::span<float> bias = chunks_[c]->expert_bias();
    const std::size_t layers = ranges_[c].end_layer - ranges_[c].first_layer;
    for (std::size_t l = 0; l < layers && !bias.empty(); ++l) {
      const std::size_t experts = bias.size() / layers;
      kernels::update_expert_bias(bias.data() + l * experts, counts.data() + at + l * experts,
                                  experts, layout_.expert_bias_rate);
    }
    at += bias.size();
    const std::span<double> mine = chunks_[c]->expert_counts();
    std::fill(mine.begin(), mine.end(), 0.0);
  }
}

std::vector<Model::StateArray> DistributedModel::state_arrays() {
  std::vector<StateArray> arrays;
  if (layout_.expert_bias_rate <= 0) return arrays;
  const TransformerShape shape = *definition_->manifest().transformer;
  for (std::size_t c = 0; c < chunks_.size(); ++c) {
    const std::span<float> bias = chunks_[c]->expert_bias();
    const std::size_t layers = ranges_[c].end_layer - ranges_[c].first_layer;
    if (bias.empty() || layers == 0) continue;
    const std::size_t experts = bias.size() / layers;
    for (std::size_t l = 0; l < layers; ++l) {
      const std::size_t layer = ranges_[c].first_layer + l;
      if (!shape.moe_layer(layer)) continue;  // a dense layer's stays 0
      arrays.push_back({"expert_bias/layers." + std::to_string(layer),
                        Shape{static_cast<std::int64_t>(experts)}, bias.data() + l * experts});
    }
  }
  return arrays;
}

std::size_t DistributedModel::activation_bytes() const {
  std::size_t bytes = 0;
  for (const auto& chunk : chunks_) bytes += chunk->activation_bytes();
  return bytes;
}

float DistributedModel::auxiliary_loss() const {
  return layout_.pipeline ? 0.0F : chunks_.front()->auxiliary_loss(0);
}

ModelChunk::ExpertRows DistributedModel::expert_rows() const {
  ModelChunk::ExpertRows rows;
  for (const auto& chunk : chunks_) {
    rows.routed += chunk->expert_rows().routed;
    rows.computed += chunk->expert_rows().computed;
    rows.dropped += chunk->expert_rows().dropped;
  }
  return rows;
}

float DistributedModel::forward_backward(std::span<const std::int32_t> tokens,
                                         std::span<const std::int32_t> targets,
                                         std::size_t sequences, std::size_t seq, bool with_grads,
                                         const GradientsReady& ready, float loss_scale) {
  if (layout_.pipeline) {
    return pipelined_forward_backward(tokens, targets, sequences, seq, with_grads, ready,
                                      loss_scale);
  }
  ModelChunk& chunk = *chunks_.front();
  const float mean = chunk.forward(0, tokens, targets, sequences, seq, {}, {}, with_grads);
  if (with_grads) chunk.backward(0, {}, {}, loss_scale, ready);
  return (loss_scale == 1.0F ? mean : mean * loss_scale) + auxiliary_loss();
}

float DistributedModel::pipelined_forward_backward(std::span<const std::int32_t> tokens,
                                                   std::span<const std::int32_t> targets,
                                                   std::size_t sequences, std::size_t seq,
                                                   bool with_grads, const GradientsReady& ready,
                                                   float loss_scale) {
  const auto microbatches = static_cast<std::size_t>(layout_.pipeline->microbatches);
  if (sequences % microbatches != 0) {
    throw InvalidArgument(std::to_string(sequences) + " sequences per rank do not divide into " +
                          std::to_string(microbatches) + " micro-batches");
  }
  const std::size_t per = sequences / microbatches;
  const PipelineSchedule& schedule = with_grads ? *schedule_ : *forward_schedule_;
  Communicator& pipeline = context_->communicator(kPipelineAxis);
  // Final gradients announced in each chunk's last backward, those of tied parameters left for
  // the trainer to reduce after their sum.
  GradientsReady untied;
  if (ready && with_grads) {
    untied = [this, &ready](std::size_t begin, std::size_t end) {
      for (const TiedGroup& group : tied_) {
        const std::size_t at = store_.offset(group.parameter);
        if (begin < at + store_.count(group.parameter) && at < end) return;
      }
      ready(begin, end);
    };
  }
  std::vector<std::int64_t> last_backward(chunks_.size(), -1);
  for (const PipelineAction& action : schedule.actions[static_cast<std::size_t>(pipeline.rank())]) {
    if (action.pass == Pass::kBackward) {
      last_backward[static_cast<std::size_t>(action.chunk)] = action.microbatch;
    }
  }
  std::vector<std::unique_ptr<ScheduledChunk>> adapters;
  std::vector<PipelineChunk*> driven;
  for (std::size_t k = 0; k < chunks_.size(); ++k) {
    adapters.push_back(std::make_unique<ScheduledChunk>(
        *chunks_[k], tokens, targets, per, seq, loss_scale / static_cast<float>(microbatches),
        untied, last_backward[k]));
    driven.push_back(adapters.back().get());
  }
  last_schedule_ =
      run_pipeline_schedule(schedule, driven, pipeline, layout_.align_pipeline_clocks,
                            layout_.precision == Precision::kBf16 ? DType::kBF16 : DType::kF32);
  // The mean loss, from the last stage to every stage.
  double loss = last_schedule_.loss_sum / static_cast<double>(microbatches) * loss_scale;
  pipeline.all_reduce(&loss, &loss, 1, DType::kF64, ReduceOp::kSum, context_->group(kPipelineAxis));
  if (with_grads) sum_tied_gradients();
  return static_cast<float>(loss);
}

void DistributedModel::sum_tied_gradients() {
  // Each tied parameter's copies' gradients summed, so that every copy stays equal (Megatron-LM's
  // embedding group, for any parameter two stages read).
  Communicator& pipeline = context_->communicator(kPipelineAxis);
  for (const TiedGroup& group : tied_) {
    pipeline.all_reduce(store_.grad(group.parameter), store_.grad(group.parameter),
                        store_.count(group.parameter), ParameterStore::kElementType, ReduceOp::kSum,
                        Group(group.stages, std::string(kPipelineAxis)));
  }
}

}  // namespace shardwise::train
