#include "shardwise/train/trainer.hpp"
#include "shardwise/core/element_type.hpp"

#include <algorithm>
#include <cmath>

#include "sharded_units.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/adamw.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "shardwise/kernels/sum_of_squares.hpp"
#include "shardwise/train/placement.hpp"
#include "unit_gather.hpp"
#include "unit_shards.hpp"

namespace shardwise::train {

void check_settings(const TrainSettings& settings, std::size_t data_parallel_ranks,
                    const SettingNames& named) {
  if (settings.batch == 0 || data_parallel_ranks == 0 ||
      settings.batch % data_parallel_ranks != 0) {
    throw InvalidArgument(named("batch") + " " + std::to_string(settings.batch) +
                          " does not divide among the " + std::to_string(data_parallel_ranks) +
                          " data-parallel ranks (data x fsdp x expert)");
  }
  if (settings.zero < 0 || settings.zero > 3) {
    throw InvalidArgument(named("zero") + " " + std::to_string(settings.zero) +
                          " is not 0, 1, 2 or 3");
  }
  for (const auto& [dtype, name] : {std::pair{settings.reduce_dtype, "reduce_dtype"},
                                    {settings.gather_dtype, "gather_dtype"}}) {
    if (dtype != DType::kF32 && dtype != DType::kBF16) {
      throw InvalidArgument(named(name) + " " + to_string(dtype) + " is not fp32 or bf16");
    }
  }
}

float learning_rate_at(const TrainSettings& s, std::int64_t step) {
  if (s.warmup > 0 && step <= s.warmup) {
    return s.learning_rate * static_cast<float>(step) / static_cast<float>(s.warmup);
  }
  const float floor = s.learning_rate * s.min_learning_rate_ratio;
  const std::int64_t decay_steps = std::max<std::int64_t>(1, s.steps - s.warmup);
  const double progress =
      std::clamp(static_cast<double>(step - s.warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return floor + static_cast<float>(cosine) * (s.learning_rate - floor);
}

namespace {

// The label of an axis the mesh lacks: nothing is sent along it (its groups are one rank).
std::string axis_or(const std::string& axis, const char* absent) {
  return axis.empty() ? std::string(absent) : axis;
}

// A block of experts the expert axis splits: not averaged over it (placement.hpp).
bool split_over_experts(const ParameterSpec& spec) {
  return std::find(spec.gradient.averaged_over.begin(), spec.gradient.averaged_over.end(),
                   AxisRole::kExperts) == spec.gradient.averaged_over.end();
}

}  // namespace

void check_gradient_reductions(const std::vector<ParameterSpec>& parameters) {
  const auto words_of = [](const std::vector<AxisRole>& roles) {
    std::string words;
    for (const AxisRole role : roles) words += (words.empty() ? "" : ", ") + mesh_axis(role).name;
    return words;
  };
  const auto sorted = [](std::vector<AxisRole> roles) {
    std::sort(roles.begin(), roles.end());
    roles.erase(std::unique(roles.begin(), roles.end()), roles.end());
    return roles;
  };
  const std::vector<AxisRole> batch = sorted(GradientReduction().averaged_over);
  const std::vector<AxisRole> expert_block = {AxisRole::kBatch, AxisRole::kParameterShard};
  for (const ParameterSpec& spec : parameters) {
    const std::vector<AxisRole> averaged = sorted(spec.gradient.averaged_over);
    if ((averaged == batch || averaged == sorted(expert_block)) &&
        spec.gradient.model_sharers >= 1) {
      continue;
    }
    const std::string words = words_of(spec.gradient.averaged_over);
    throw InvalidArgument("parameter '" + spec.name + "' declares its gradient averaged over " +
                          (words.empty() ? std::string("no axis") : words) +
                          (spec.gradient.model_sharers == 0 ? " among 0 model ranks" : "") +
                          "; the trainer averages every gradient over " + words_of(batch) +
                          ", or a block of experts the expert axis splits over " +
                          words_of(expert_block));
  }
}

Trainer::Trainer(ParallelContext& context, Model& model, const Corpus& corpus,
                 TrainSettings settings)
    : context_(context),
      shards_comm_(context.communicator(axis_or(context.shard_axis(), "fsdp"))),
      group_(context.group(axis_or(context.shard_axis(), "fsdp"))),
      replicas_comm_(context.replica_axis().empty() ? context.alone()
                                                    : context.communicator("data")),
      replicas_(context.replica_axis().empty() ? Group({0}, "data") : context.group("data")),
      experts_comm_(context.communicator(kExpertAxis)),
      experts_(context.group(kExpertAxis)),
      model_(model),
      store_(model.parameters()),
      corpus_(corpus),
      settings_(settings) {
  member_ = shards_comm_.rank();
  const auto n = static_cast<std::size_t>(group_.size());
  check_settings(settings_, static_cast<std::size_t>(context.data_parallel_size()));
  check_gradient_reductions(store_.specs());
  ParameterStore& store = store_;
  if (settings_.zero == 0) {
    m_.assign(store.size(), 0.0F);
    v_.assign(store.size(), 0.0F);
    return;
  }
  if (!settings_.shardings) {
    settings_.shardings = default_shardings(store.specs(), axis_or(context_.shard_axis(), "fsdp"),
                                            static_cast<std::int64_t>(n));
  }
  if (settings_.zero == 3) {
    // Each rank keeps its blocks of every unit; the store's full buffers go away.
    units_ = std::make_unique<detail::ShardedUnits>(shards_comm_, group_, store,
                                                    *settings_.shardings, settings_.overlap,
                                                    settings_.reduce_dtype, settings_.gather_dtype);
  } else {
    shards_ = std::make_unique<detail::UnitShards>(store, *settings_.shardings, group_.size());
    if (settings_.zero == 2) grads_slice_.assign(shards_->slice_size(), 0.0F);
  }
  m_.assign(layout().slice_size(), 0.0F);
  v_.assign(layout().slice_size(), 0.0F);
}

const detail::UnitShards& Trainer::layout() const { return units_ ? units_->shards() : *shards_; }

const ParameterShardings* Trainer::shardings() const {
  return settings_.shardings ? &*settings_.shardings : nullptr;
}

Trainer::~Trainer() = default;

float Trainer::run_model(const TokenBatch& batch, float loss_scale, bool with_grads,
                         const GradientsReady& ready) {
  if (!units_) {
    return model_.forward_backward(batch.tokens, batch.targets, batch.sequences, batch.seq,
                                   with_grads, ready, loss_scale);
  }
  units_->begin_pass(with_grads);
  try {
    const float loss = model_.forward_backward(
        batch.tokens, batch.targets, batch.sequences, batch.seq, with_grads,
        [&](std::size_t begin, std::size_t end) {
          if (settings_.overlap) units_->gradients_ready(begin, end);
        },
        loss_scale);
    units_->end_pass();
    return loss;
  } catch (...) {
    units_->abandon_pass();
    throw;
  }
}

TokenBatch Trainer::my_share(Corpus::Split split, std::uint64_t index) const {
  const std::size_t per_rank =
      settings_.batch / static_cast<std::size_t>(context_.data_parallel_size());
  const auto slot = static_cast<std::size_t>(context_.data_parallel_index());
  return corpus_.batch(split, settings_.seed, index, settings_.batch, slot * per_rank, per_rank,
                       settings_.seq);
}

float Trainer::scale_of(Corpus::Split split, std::uint64_t index) const {
  return corpus_.loss_scale(split, settings_.seed, index, settings_.batch, settings_.seq);
}

StepStats Trainer::step() {
  // The step counts once it has happened: a step that fails leaves the count as it was.
  const std::int64_t step = steps_done_ + 1;
  ParameterStore& store = store_;
  const auto n = static_cast<std::size_t>(group_.size());
  const TokenBatch batch = my_share(Corpus::Split::kTrain, static_cast<std::uint64_t>(step));
  if (units_) {
    const StepStats stats = step_units(step, batch);
    model_.end_step();
    steps_done_ = step;
    return stats;
  }
  store.zero_grads();
  std::span<float> grads = store.grads();
  // ZeRO 0 and 1 average every gradient over the group: each range's all-reduce starts as soon
  // as backward has finished it, and runs while backward goes on (the local backend's worker
  // thread moves it; MPI progresses it inside later calls).
  std::vector<Work> in_flight;
  std::vector<std::pair<std::size_t, std::size_t>> started;
  // In bf16, each range's rounding (and where it goes back), alive until its reduction is done.
  std::vector<std::pair<std::size_t, std::vector<BFloat16>>> narrowed;
  // Within the shards while backward goes on; across the replicas (HSDP) after it, blocking,
  // so that two operations never work on one range at once.
  const auto reduce = [&](std::size_t begin, std::size_t end) {
    if (group_.size() == 1) return;
    if (settings_.reduce_dtype == DType::kBF16) {
      auto& [at, range] = narrowed.emplace_back(begin, std::vector<BFloat16>(end - begin));
      kernels::to_bf16(grads.subspan(begin, end - begin), range);
      in_flight.push_back(shards_comm_.iall_reduce(range.data(), range.data(), range.size(),
                                                   element_type(range.data()), ReduceOp::kAvg,
                                                   group_));
      return;
    }
    in_flight.push_back(shards_comm_.iall_reduce(grads.data() + begin, grads.data() + begin,
                                                 end - begin, element_type(grads.data()),
                                                 ReduceOp::kAvg, group_));
  };
  const GradientsReady ready = [&](std::size_t begin, std::size_t end) {
    if (settings_.zero == 2 || !settings_.overlap || end <= begin ||
        end > store.parameter_elements()) {
      return;
    }
    reduce(begin, end);
    started.emplace_back(begin, end);
  };
  float loss = 0;
  try {
    loss = run_model(batch, scale_of(Corpus::Split::kTrain, static_cast<std::uint64_t>(step)), true,
                     ready);
    reduce_unannounced(started, reduce);
    for (Work& work : in_flight) work.wait();
    for (const auto& [at, range] : narrowed)
      kernels::to_float(range, grads.subspan(at, range.size()));
  } catch (...) {
    // Peers may still be reading this rank's gradients for the reductions already started:
    // none is dropped before it has finished, or failed, everywhere.
    for (Work& work : in_flight) {
      try {
        work.wait();
      } catch (...) {  // the failure that matters is being thrown already
      }
    }
    throw;
  }
  if (settings_.zero != 2) {
    average_over_replicas(grads.first(store.parameter_elements()));
    combine_over_experts(grads.data(), false);
  }
  average(&loss, 1);
  if (settings_.zero == 2) reduce_scatter_grads();

  // The global norm: every rank sums the squares of a disjoint part, one sum over the group.
  double squares = 0;
  if (settings_.zero == 0) {
    const std::size_t total = store.parameter_elements();
    const std::size_t part = (total + n - 1) / n;
    const std::size_t first = std::min(total, static_cast<std::size_t>(member_) * part);
    const std::size_t last = std::min(total, first + part);
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      const std::size_t begin = std::max(first, store.offset(p));
      const std::size_t end = std::min(last, store.offset(p) + store.count(p));
      if (begin < end && counted_once(p)) {
        squares += kernels::sum_of_squares(grads.data() + begin, end - begin);
      }
    }
  } else {
    squares = owned_squares();
  }
  const float norm = global_norm(squares);
  const float learning_rate = learning_rate_at(settings_, step);
  update(learning_rate, clip_scale(norm), step);
  if (settings_.zero > 0) gather_values();
  model_.end_step();
  steps_done_ = step;
  return {step, loss, learning_rate, norm};
}

double Trainer::owned_squares() const {
  const detail::UnitShards& shards = layout();
  const ParameterStore& store = store_;
  double squares = 0;
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    if (!shards.first_copy(p, member_) || !counted_once(p)) continue;
    if (settings_.zero == 1) {
      const float* grads = store.grads().data() + store.offset(p);
      shards.for_each_run(p, member_, [&](std::size_t from, std::size_t, std::size_t length) {
        squares += kernels::sum_of_squares(grads + from, length);
      });
    } else {
      const float* slice = owned_grads_slice();
      squares += kernels::sum_of_squares(slice + shards.slice_offset(p),
                                         shards.block_elements(p, member_));
    }
  }
  return squares;
}

const float* Trainer::owned_grads_slice() const {
  return units_ ? units_->grads_slice().data() : grads_slice_.data();
}

bool Trainer::counted_once(std::size_t parameter) const {
  const ParameterSpec& spec = store_.specs()[parameter];
  // A block the model ranks split counts on each; a parameter they all hold whole on the first;
  // a block several of them share on the first of those. The same over the expert axis: its
  // ranks' experts count on each, what they all hold on the first.
  const auto coordinate = static_cast<std::size_t>(context_.coordinate(kModelAxis));
  const bool over_model =
      coordinate == 0 || (!spec.block.empty() && coordinate % spec.gradient.model_sharers == 0);
  const bool over_experts = context_.coordinate(kExpertAxis) == 0 || split_over_experts(spec);
  return !spec.tied_copy && over_model && over_experts;
}

void Trainer::combine_over_experts(float* grads, bool slices) {
  if (experts_.size() <= 1) return;
  // What every expert rank holds (the dense parameters) is averaged over them, in one message;
  // each rank's own experts are divided by the degree (their gradients sum every rank's tokens).
  const ParameterStore& store = store_;
  const detail::UnitShards* shards = slices ? &layout() : nullptr;
  const float share = 1.0F / static_cast<float>(experts_.size());
  std::vector<float>& dense = expert_staging_;
  dense.clear();
  const auto each_range = [&](auto&& visit) {
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      const std::size_t at = slices ? shards->slice_offset(p) : store.offset(p);
      const std::size_t count = slices ? shards->block_elements(p, member_) : store.count(p);
      visit(split_over_experts(store.specs()[p]), grads + at, count);
    }
  };
  each_range([&](bool own, float* range, std::size_t count) {
    if (own) {
      for (std::size_t i = 0; i < count; ++i) range[i] *= share;
    } else {
      dense.insert(dense.end(), range, range + count);
    }
  });
  average_in_reduce_dtype(experts_comm_, experts_, dense);
  std::size_t taken = 0;
  each_range([&](bool own, float* range, std::size_t count) {
    if (own) return;
    std::copy_n(dense.data() + taken, count, range);
    taken += count;
  });
}

float Trainer::global_norm(double squares) {
  shards_comm_.all_reduce(&squares, &squares, 1, DType::kF64, ReduceOp::kSum, group_);
  // Model ranks hold blocks of one parameter, pipeline stages parameters of their own, expert
  // ranks experts of their own.
  for (const std::string_view axis : {kModelAxis, kPipelineAxis, kExpertAxis}) {
    if (context_.degree(axis) > 1) {
      context_.communicator(axis).all_reduce(&squares, &squares, 1, DType::kF64, ReduceOp::kSum,
                                             context_.group(axis));
    }
  }
  return static_cast<float>(std::sqrt(squares));
}

float Trainer::clip_scale(float norm) const {
  return settings_.grad_clip > 0 && norm > settings_.grad_clip
             ? settings_.grad_clip / (norm + 1e-6F)
             : 1.0F;
}

void Trainer::reduce_scatter_grads() {
  // Unit by unit: every member's blocks packed one after the other, then one reduce-scatter
  // leaves this rank its own, averaged.
  const detail::UnitShards& shards = *shards_;
  const ParameterStore& store = store_;
  std::vector<float>& packed = packed_;
  for (std::size_t u = 0; u < store.units().size(); ++u) {
    packed.resize(shards.chunk(u) * static_cast<std::size_t>(group_.size()));
    shards.pack_all(u, store.grads().data() + store.units()[u].offset, packed.data());
    float* const mine = grads_slice_.data() + shards.chunk_offset(u);
    if (settings_.reduce_dtype == DType::kBF16) {
      reduce_scatter_in_bf16(packed, {mine, shards.chunk(u)});
      continue;
    }
    shards_comm_.reduce_scatter(packed.data(), mine, shards.chunk(u), element_type(packed.data()),
                                ReduceOp::kAvg, group_);
  }
  average_over_replicas(grads_slice_);
  combine_over_experts(grads_slice_.data(), true);
}

void Trainer::gather_values() {
  // Every rank's updated blocks to every rank, unit by unit.
  const detail::UnitShards& shards = *shards_;
  ParameterStore& store = store_;
  for (std::size_t u = 0; u < store.units().size(); ++u) {
    float* full = store.values().data() + store.units()[u].offset;
    const std::size_t chunk = shards.chunk(u);
    // This rank's chunk, then every member's after it, in one buffer kept from step to step.
    packed_.resize(chunk * (static_cast<std::size_t>(group_.size()) + 1));
    float* mine = packed_.data() + chunk * static_cast<std::size_t>(group_.size());
    shards.pack(u, member_, full, mine);
    gather_unit(shards_comm_, group_, shards, u, mine, packed_.data(), full);
  }
}

StepStats Trainer::step_units(std::int64_t step, const TokenBatch& batch) {
  // Forward and backward gather each unit as the model uses it; each unit's gradients are
  // reduce-scattered into this rank's blocks as backward finishes them.
  float loss =
      run_model(batch, scale_of(Corpus::Split::kTrain, static_cast<std::uint64_t>(step)), true, {});
  average_over_replicas(units_->grads_slice());
  combine_over_experts(units_->grads_slice().data(), true);
  average(&loss, 1);
  const float norm = global_norm(owned_squares());
  const float learning_rate = learning_rate_at(settings_, step);
  update(learning_rate, clip_scale(norm), step);
  return {step, loss, learning_rate, norm};
}

void Trainer::update(float learning_rate, float grad_scale, std::int64_t step) {
  ParameterStore& store = store_;
  kernels::AdamWSettings adamw;
  adamw.learning_rate = learning_rate;
  adamw.beta1 = settings_.beta1;
  adamw.beta2 = settings_.beta2;
  adamw.grad_scale = grad_scale;  // clipping, applied in the update's pass
  if (settings_.zero == 0) {
    for (std::size_t p = 0; p < store.specs().size(); ++p) {
      adamw.weight_decay = store.specs()[p].weight_decay ? settings_.weight_decay : 0.0F;
      const std::size_t at = store.offset(p);
      kernels::adamw_update(store.values().data() + at, store.grads().data() + at, m_.data() + at,
                            v_.data() + at, store.count(p), adamw, step);
    }
    return;
  }
  // Each rank updates its blocks only: in its slices (ZeRO-3), or in the full values from its
  // slice of gradients (ZeRO-2) or from the full gradients (ZeRO-1).
  const detail::UnitShards& shards = layout();
  float* values_slice = units_ ? units_->values_slice().data() : nullptr;
  float* grads_slice = units_ ? units_->grads_slice().data() : grads_slice_.data();
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    adamw.weight_decay = store.specs()[p].weight_decay ? settings_.weight_decay : 0.0F;
    const std::size_t at = shards.slice_offset(p);
    if (units_) {
      const std::size_t count = shards.block_elements(p, member_);
      kernels::adamw_update(values_slice + at, grads_slice + at, m_.data() + at, v_.data() + at,
                            count, adamw, step);
      continue;
    }
    float* values = store.values().data() + store.offset(p);
    float* full_grads = store.grads().data() + store.offset(p);
    shards.for_each_run(p, member_, [&](std::size_t from, std::size_t to, std::size_t length) {
      float* grads = settings_.zero == 1 ? full_grads + from : grads_slice + at + to;
      kernels::adamw_update(values + from, grads, m_.data() + at + to, v_.data() + at + to, length,
                            adamw, step);
    });
  }
}

void Trainer::average(float* data, std::size_t count) {
  // Within the shards, then across the replicas: equal counts, so the mean of means is the mean.
  if (group_.size() > 1) {
    shards_comm_.all_reduce(data, data, count, element_type(data), ReduceOp::kAvg, group_);
  }
  if (replicas_.size() > 1) {
    replicas_comm_.all_reduce(data, data, count, element_type(data), ReduceOp::kAvg, replicas_);
  }
  if (experts_.size() > 1) {
    experts_comm_.all_reduce(data, data, count, element_type(data), ReduceOp::kAvg, experts_);
  }
}

void Trainer::average_over_replicas(std::span<float> values) {
  if (replicas_.size() <= 1) return;
  average_in_reduce_dtype(replicas_comm_, replicas_, values);
}

void Trainer::average_in_reduce_dtype(Communicator& comm, const Group& group,
                                      std::span<float> values) {
  if (settings_.reduce_dtype == DType::kBF16) {
    std::vector<BFloat16>& narrow = narrow_;
    narrow.resize(values.size());
    kernels::to_bf16(values, narrow);
    comm.all_reduce(narrow.data(), narrow.data(), narrow.size(), element_type(narrow.data()),
                    ReduceOp::kAvg, group);
    kernels::to_float(narrow, values);
    return;
  }
  comm.all_reduce(values.data(), values.data(), values.size(), element_type(values.data()),
                  ReduceOp::kAvg, group);
}

void Trainer::reduce_scatter_in_bf16(std::span<const float> packed, std::span<float> mine) {
  std::vector<BFloat16>& narrow = narrow_;
  narrow.resize(packed.size() + mine.size());
  const std::span<BFloat16> all(narrow.data(), packed.size());
  const std::span<BFloat16> own(narrow.data() + packed.size(), mine.size());
  kernels::to_bf16(packed, all);
  shards_comm_.reduce_scatter(all.data(), own.data(), own.size(), element_type(all.data()),
                              ReduceOp::kAvg, group_);
  kernels::to_float(own, mine);
}

void Trainer::reduce_unannounced(std::vector<std::pair<std::size_t, std::size_t>>& started,
                                 const std::function<void(std::size_t, std::size_t)>& reduce) {
  if (settings_.zero == 2) return;
  // What the model did not announce (a model without the hook announces nothing) is reduced
  // now; overlapping announcements are a model's bug.
  std::sort(started.begin(), started.end());
  std::size_t covered = 0;
  for (const auto& [begin, end] : started) {
    if (begin < covered) {
      throw InvalidArgument("the model announced gradients [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") twice");
    }
    if (begin > covered) reduce(covered, begin);
    covered = end;
  }
  const std::size_t total = store_.parameter_elements();
  if (covered < total) reduce(covered, total);
}

float Trainer::validation_loss(std::size_t batches) {
  double sum = 0;
  for (std::size_t b = 0; b < batches; ++b) {
    float loss = run_model(my_share(Corpus::Split::kValidation, b),
                           scale_of(Corpus::Split::kValidation, b), false, {});
    average(&loss, 1);
    sum += loss;
  }
  return batches == 0 ? 0.0F : static_cast<float>(sum / static_cast<double>(batches));
}

std::size_t Trainer::params_bytes() const {
  return (units_ ? units_->slice_size() : store_.size()) * sizeof(float);
}

std::size_t Trainer::grads_bytes() const {
  return (units_ ? units_->slice_size() : store_.size() + grads_slice_.size()) * sizeof(float);
}

std::size_t Trainer::gathered_peak_bytes() const {
  return units_ ? units_->peak_gathered_bytes() : 0;
}

std::pair<std::size_t, std::size_t> Trainer::gathers_prefetched_and_waited() const {
  if (!units_) return {0, 0};
  return {units_->prefetched_gathers(), units_->waiting_gathers()};
}

std::size_t Trainer::gathered_bytes() const { return units_ ? units_->gathered_bytes() : 0; }

std::size_t Trainer::gather_buffers_kept_bytes() const { return units_ ? units_->kept_bytes() : 0; }

std::vector<float> Trainer::full_parameters() {
  if (units_) return units_->full_values();
  const std::span<const float> values = store_.values();
  return {values.begin(),
          values.begin() + static_cast<std::ptrdiff_t>(store_.parameter_elements())};
}

std::size_t Trainer::optimizer_bytes() const { return (m_.size() + v_.size()) * sizeof(float); }

}  // namespace shardwise::train
