#include "shardwise/train/trainer.hpp"

#include <algorithm>
#include <cmath>

#include "sharded_units.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/adamw.hpp"

namespace shardwise::train {

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

Trainer::Trainer(Communicator& comm, const Group& group, Model& model, const Corpus& corpus,
                 TrainSettings settings)
    : Trainer(comm, group, Group{{comm.rank()}, group.axes}, model, corpus, settings) {}

Trainer::Trainer(Communicator& comm, const Group& shards, const Group& replicas, Model& model,
                 const Corpus& corpus, TrainSettings settings)
    : comm_(comm),
      group_(shards),
      replicas_(replicas),
      model_(model),
      store_(model.parameters()),
      corpus_(corpus),
      settings_(settings) {
  member_ = group_.index_of(comm_.rank());
  replica_ = replicas_.index_of(comm_.rank());
  if (member_ < 0 || replica_ < 0) {
    throw InvalidArgument("rank " + std::to_string(comm_.rank()) +
                          " is not in the trainer's groups " + group_.to_string() + " and " +
                          replicas_.to_string());
  }
  const auto n = static_cast<std::size_t>(group_.size());
  const auto ranks = n * static_cast<std::size_t>(replicas_.size());
  if (settings_.batch == 0 || settings_.batch % ranks != 0) {
    throw InvalidArgument("--batch " + std::to_string(settings_.batch) +
                          " does not divide among the " + std::to_string(ranks) +
                          " data-parallel ranks");
  }
  if (settings_.zero < 0 || settings_.zero > 3) {
    throw InvalidArgument("--zero " + std::to_string(settings_.zero) + " is not 0, 1, 2 or 3");
  }
  ParameterStore& store = store_;
  if (settings_.zero == 3) {
    // Each rank keeps a slice of every unit; the store's full buffers go away.
    units_ = std::make_unique<detail::ShardedUnits>(comm_, group_, store, settings_.overlap);
    m_.assign(units_->values_slice().size(), 0.0F);
    v_.assign(units_->values_slice().size(), 0.0F);
    return;
  }
  store.pad_to_multiple(n);
  const std::size_t chunk = store.size() / n;
  if (settings_.zero == 0) {
    chunk_begin_ = 0;
    chunk_end_ = store.size();
  } else {
    chunk_begin_ = static_cast<std::size_t>(member_) * chunk;
    chunk_end_ = chunk_begin_ + chunk;
  }
  m_.assign(chunk_end_ - chunk_begin_, 0.0F);
  v_.assign(chunk_end_ - chunk_begin_, 0.0F);
  if (settings_.zero == 2) grad_chunk_.assign(chunk, 0.0F);
}

Trainer::~Trainer() = default;

float Trainer::run_model(const TokenBatch& batch, bool with_grads, const GradientsReady& ready) {
  if (!units_) {
    return model_.loss(batch.tokens, batch.targets, batch.sequences, batch.seq, with_grads, ready);
  }
  units_->begin_pass(with_grads);
  try {
    const float loss = model_.loss(batch.tokens, batch.targets, batch.sequences, batch.seq,
                                   with_grads, [&](std::size_t begin, std::size_t end) {
                                     if (settings_.overlap) units_->gradients_ready(begin, end);
                                   });
    units_->end_pass();
    return loss;
  } catch (...) {
    units_->abandon_pass();
    throw;
  }
}

TokenBatch Trainer::my_share(Corpus::Split split, std::uint64_t index) const {
  const auto n = static_cast<std::size_t>(group_.size());
  const std::size_t per_rank = settings_.batch / (n * static_cast<std::size_t>(replicas_.size()));
  const std::size_t slot =
      static_cast<std::size_t>(replica_) * n + static_cast<std::size_t>(member_);
  return corpus_.batch(split, settings_.seed, index, slot * per_rank, per_rank, settings_.seq);
}

StepStats Trainer::step() {
  const std::int64_t step = ++steps_done_;
  ParameterStore& store = store_;
  const auto n = static_cast<std::size_t>(group_.size());
  const TokenBatch batch = my_share(Corpus::Split::kTrain, static_cast<std::uint64_t>(step));
  if (units_) return step_units(step, batch);
  store.zero_grads();
  std::span<float> grads = store.grads();
  // ZeRO 0 and 1 average every gradient over the group: each range's all-reduce starts as soon
  // as backward has finished it, and runs while backward goes on (the local backend's worker
  // thread moves it; MPI progresses it inside later calls).
  std::vector<Work> in_flight;
  std::vector<std::pair<std::size_t, std::size_t>> started;
  // Within the shards while backward goes on; across the replicas (HSDP) after it, blocking,
  // so that two operations never work on one range at once.
  const auto reduce = [&](std::size_t begin, std::size_t end) {
    if (group_.size() == 1) return;
    in_flight.push_back(comm_.iall_reduce(grads.data() + begin, grads.data() + begin, end - begin,
                                          DType::kF32, ReduceOp::kAvg, group_));
  };
  const GradientsReady ready = [&](std::size_t begin, std::size_t end) {
    if (settings_.zero == 2 || !settings_.overlap || end <= begin ||
        end > store.parameter_elements()) {
      return;
    }
    reduce(begin, end);
    started.emplace_back(begin, end);
  };
  float loss = run_model(batch, true, ready);
  if (settings_.zero != 2) {
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
    if (covered < store.parameter_elements()) reduce(covered, store.parameter_elements());
  }
  for (Work& work : in_flight) work.wait();
  if (settings_.zero != 2 && replicas_.size() > 1) {
    comm_.all_reduce(grads.data(), grads.data(), store.parameter_elements(), DType::kF32,
                     ReduceOp::kAvg, replicas_);
  }
  average(&loss, 1);

  // The averaged gradients of the owned elements: all of them (ZeRO 0 and 1) or this rank's
  // chunk (ZeRO 2 reduce-scatters the buffer after backward).
  float* owned = grads.data() + chunk_begin_;
  if (settings_.zero == 2) {
    comm_.reduce_scatter(grads.data(), grad_chunk_.data(), grad_chunk_.size(), DType::kF32,
                         ReduceOp::kAvg, group_);
    if (replicas_.size() > 1) {
      comm_.all_reduce(grad_chunk_.data(), grad_chunk_.data(), grad_chunk_.size(), DType::kF32,
                       ReduceOp::kAvg, replicas_);
    }
    owned = grad_chunk_.data();
  }
  // The global norm: every rank sums the squares of a disjoint part, one sum over the group.
  const std::size_t first =
      settings_.zero == 0 ? static_cast<std::size_t>(member_) * (store.size() / n) : 0;
  const std::size_t count = settings_.zero == 0 ? store.size() / n : chunk_end_ - chunk_begin_;
  const float* part = settings_.zero == 0 ? grads.data() + first : owned;
  const float norm = clip({part, count}, {owned, chunk_end_ - chunk_begin_});
  const float learning_rate = learning_rate_at(settings_, step);
  if (settings_.zero == 2) {
    std::copy(grad_chunk_.begin(), grad_chunk_.end(),
              grads.begin() + static_cast<std::ptrdiff_t>(chunk_begin_));
  }
  update(learning_rate);
  if (settings_.zero > 0) {
    // Every rank's updated chunk to every rank.
    const std::size_t chunk = chunk_end_ - chunk_begin_;
    std::span<float> values = store.values();
    comm_.all_gather(values.data() + chunk_begin_, values.data(), chunk, DType::kF32, group_);
  }
  return {step, loss, learning_rate, norm};
}

float Trainer::clip(std::span<const float> part, std::span<float> owned) {
  double squares = 0;
  for (float g : part) squares += static_cast<double>(g) * g;
  comm_.all_reduce(&squares, &squares, 1, DType::kF64, ReduceOp::kSum, group_);
  const auto norm = static_cast<float>(std::sqrt(squares));
  const float scale = settings_.grad_clip > 0 && norm > settings_.grad_clip
                          ? settings_.grad_clip / (norm + 1e-6F)
                          : 1.0F;
  for (float& g : owned) g *= scale;
  return norm;
}

StepStats Trainer::step_units(std::int64_t step, const TokenBatch& batch) {
  // Forward and backward gather each unit as the model uses it; each unit's gradients are
  // reduce-scattered into this rank's slice as backward finishes them.
  float loss = run_model(batch, true, {});
  std::span<float> grads = units_->grads_slice();
  if (replicas_.size() > 1) {
    comm_.all_reduce(grads.data(), grads.data(), grads.size(), DType::kF32, ReduceOp::kAvg,
                     replicas_);
  }
  average(&loss, 1);
  // The slices are disjoint over the shards (replicas hold the same ones).
  const float norm = clip(grads, grads);
  const float learning_rate = learning_rate_at(settings_, step);
  update_units(learning_rate);
  return {step, loss, learning_rate, norm};
}

void Trainer::update_units(float learning_rate) {
  const ParameterStore& store = store_;
  kernels::AdamWSettings adamw;
  adamw.learning_rate = learning_rate;
  adamw.beta1 = settings_.beta1;
  adamw.beta2 = settings_.beta2;
  float* values = units_->values_slice().data();
  float* grads = units_->grads_slice().data();
  for (std::size_t u = 0; u < store.units().size(); ++u) {
    const ParameterUnit& unit = store.units()[u];
    // This rank's part of the unit, in the unit's own element numbering.
    const std::size_t mine = static_cast<std::size_t>(units_->member()) * units_->chunk(u);
    const std::size_t mine_end = mine + units_->chunk(u);
    for (std::size_t p = unit.first; p < unit.end; ++p) {
      const std::size_t begin = std::max(store.offset(p) - unit.offset, mine);
      const std::size_t end = std::min(store.offset(p) - unit.offset + store.count(p), mine_end);
      if (begin >= end) continue;
      adamw.weight_decay = store.specs()[p].weight_decay ? settings_.weight_decay : 0.0F;
      const std::size_t at = units_->slice_offset(u) + (begin - mine);
      kernels::adamw_update(values + at, grads + at, m_.data() + at, v_.data() + at, end - begin,
                            adamw, steps_done_);
    }
  }
}

void Trainer::update(float learning_rate) {
  ParameterStore& store = store_;
  kernels::AdamWSettings adamw;
  adamw.learning_rate = learning_rate;
  adamw.beta1 = settings_.beta1;
  adamw.beta2 = settings_.beta2;
  // Each parameter's part inside the owned range, with its own weight decay.
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    const std::size_t begin = std::max(store.offset(p), chunk_begin_);
    const std::size_t end = std::min(store.offset(p) + store.count(p), chunk_end_);
    if (begin >= end) continue;
    adamw.weight_decay = store.specs()[p].weight_decay ? settings_.weight_decay : 0.0F;
    const std::size_t local = begin - chunk_begin_;
    kernels::adamw_update(store.values().data() + begin, store.grads().data() + begin,
                          m_.data() + local, v_.data() + local, end - begin, adamw, steps_done_);
  }
}

void Trainer::average(float* data, std::size_t count) {
  // Within the shards, then across the replicas: equal counts, so the mean of means is the mean.
  for (const Group* g : {&group_, &replicas_}) {
    if (g->size() > 1) comm_.all_reduce(data, data, count, DType::kF32, ReduceOp::kAvg, *g);
  }
}

float Trainer::validation_loss(std::size_t batches) {
  double sum = 0;
  for (std::size_t b = 0; b < batches; ++b) {
    float loss = run_model(my_share(Corpus::Split::kValidation, b), false, {});
    average(&loss, 1);
    sum += loss;
  }
  return batches == 0 ? 0.0F : static_cast<float>(sum / static_cast<double>(batches));
}

std::size_t Trainer::params_bytes() const {
  return (units_ ? units_->slice_size() : store_.size()) * sizeof(float);
}

std::size_t Trainer::grads_bytes() const {
  return (units_ ? units_->slice_size() : store_.size() + grad_chunk_.size()) * sizeof(float);
}

std::size_t Trainer::gathered_peak_bytes() const {
  return units_ ? units_->peak_gathered_bytes() : 0;
}

std::pair<std::size_t, std::size_t> Trainer::gathers_prefetched_and_waited() const {
  if (!units_) return {0, 0};
  return {units_->prefetched_gathers(), units_->waiting_gathers()};
}

std::size_t Trainer::gathered_bytes() const { return units_ ? units_->gathered_bytes() : 0; }

std::vector<float> Trainer::full_parameters() {
  if (units_) return units_->full_values();
  const std::span<const float> values = store_.values();
  return {values.begin(),
          values.begin() + static_cast<std::ptrdiff_t>(store_.parameter_elements())};
}

std::size_t Trainer::optimizer_bytes() const { return (m_.size() + v_.size()) * sizeof(float); }

}  // namespace shardwise::train
