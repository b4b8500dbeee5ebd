#include "sharded_units.hpp"

#include <algorithm>

#include "shardwise/core/element_type.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"
#include "unit_gather.hpp"

namespace shardwise::train::detail {
namespace {

// Reduce-scatters allowed in flight before the oldest is waited for: each holds a unit's full
// gradients, so this bounds them (with the unit in backward) to three units.
constexpr std::size_t kMaxReducing = 2;

}  // namespace

ShardedUnits::ShardedUnits(Communicator& comm, const Group& shards, ParameterStore& store,
                           const ParameterShardings& shardings, bool prefetch, DType reduce_dtype,
                           DType gather_dtype)
    : comm_(comm),
      group_(shards),
      store_(store),
      member_(shards.index_of(comm.rank())),
      prefetch_(prefetch),
      reduce_dtype_(reduce_dtype),
      gather_dtype_(gather_dtype),
      shards_(store, shardings, shards.size()) {
  if (member_ < 0) {
    throw InvalidArgument("rank " + std::to_string(comm.rank()) + " is not in the shard group " +
                          group_.to_string());
  }
  if (store.sharded()) throw InvalidArgument("the parameter store is already sharded");
  values_slice_.assign(shards_.slice_size(), 0.0F);
  grads_slice_.assign(shards_.slice_size(), 0.0F);
  if (store.initialization_pending()) {
    // Each block drawn straight into the slice: the store's buffers are never allocated.
    for (std::size_t u = 0; u < store.units().size(); ++u) {
      float* chunk = my_chunk(values_slice_, u);
      for (std::size_t p = store.units()[u].first; p < store.units()[u].end; ++p) {
        shards_.for_each_run(p, member_, [&](std::size_t from, std::size_t to, std::size_t n) {
          store.initial_values(p, from, n, chunk + shards_.slot(p) + to);
        });
      }
    }
  } else {
    const std::span<const float> full = store.values();
    for (std::size_t u = 0; u < store.units().size(); ++u) {
      shards_.pack(u, member_, full.data() + store.units()[u].offset, my_chunk(values_slice_, u));
    }
  }
  units_.resize(store.units().size());
  store.shard(this);
}

ShardedUnits::~ShardedUnits() {
  abandon_pass();
  store_.shard(nullptr);
}

std::size_t ShardedUnits::packed(std::size_t unit) const {
  return shards_.chunk(unit) * static_cast<std::size_t>(group_.size());
}

float* ShardedUnits::my_chunk(std::vector<float>& slice, std::size_t unit) {
  return slice.data() + shards_.chunk_offset(unit);
}

void ShardedUnits::allocate(std::vector<float>& buffer, std::size_t elements, bool zeroed) {
  const auto kept = kept_.find(elements);
  if (kept != kept_.end()) {
    buffer = std::move(kept->second.back());
    kept->second.pop_back();
    if (kept->second.empty()) kept_.erase(kept);
    kept_bytes_ -= elements * sizeof(float);
    if (zeroed) std::fill(buffer.begin(), buffer.end(), 0.0F);
  } else {
    buffer.assign(elements, 0.0F);
  }
  gathered_bytes_ += buffer.size() * sizeof(float);
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
}

Work ShardedUnits::start_gather(std::size_t u) {
  Unit& unit = units_[u];
  const float* mine = my_chunk(values_slice_, u);
  if (gather_dtype_ == DType::kBF16) {
    const std::size_t chunk = shards_.chunk(u);
    unit.mine_bf16.resize(chunk);
    kernels::to_bf16({mine, chunk}, unit.mine_bf16);
    unit.gathering_bf16.resize(packed(u));
    hold_bf16_staging(unit, true);
    return comm_.iall_gather(unit.mine_bf16.data(), unit.gathering_bf16.data(), chunk,
                             element_type(unit.mine_bf16.data()), group_);
  }
  allocate(unit.gathering, packed(u), false);
  return start_unit_gather(comm_, group_, shards_, u, mine, unit.gathering.data());
}

void ShardedUnits::finish_gather(std::size_t u) {
  Unit& unit = units_[u];
  if (gather_dtype_ == DType::kBF16) {
    allocate(unit.gathering, packed(u), false);
    kernels::to_float(unit.gathering_bf16, unit.gathering);
    free_bf16_staging(unit);
  }
  allocate(unit.values, store_.units()[u].count, false);
  shards_.unpack(u, unit.gathering.data(), unit.values.data());
  free(unit.gathering);
}

void ShardedUnits::hold_bf16_staging(const Unit& unit, bool more) {
  const std::size_t bytes = (unit.gathering_bf16.size() + unit.mine_bf16.size()) * sizeof(BFloat16);
  gathered_bytes_ = more ? gathered_bytes_ + bytes : gathered_bytes_ - bytes;
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
}

void ShardedUnits::free_bf16_staging(Unit& unit) {
  hold_bf16_staging(unit, false);
  unit.gathering_bf16 = {};
  unit.mine_bf16 = {};
}

void ShardedUnits::free(std::vector<float>& buffer) {
  const std::size_t bytes = buffer.size() * sizeof(float);
  gathered_bytes_ -= bytes;
  // Kept while what is kept and in use stays within the most ever in use at once.
  if (bytes > 0 && gathered_bytes_ + kept_bytes_ + bytes <= peak_gathered_bytes_) {
    kept_[buffer.size()].push_back(std::move(buffer));
    kept_bytes_ += bytes;
  }
  std::vector<float>().swap(buffer);
}

void ShardedUnits::check_unit(std::size_t unit, const char* what) const {
  if (unit >= units_.size()) {
    throw InvalidArgument(std::string(what) + ": unit " + std::to_string(unit) + " of " +
                          std::to_string(units_.size()));
  }
}

void ShardedUnits::begin_pass(bool with_grads) {
  if (in_pass_) throw InvalidArgument("a pass began inside another pass");
  in_pass_ = true;
  with_grads_ = with_grads;
  following_ = true;
  position_ = 0;
  prefetched_gathers_ = 0;
  waiting_gathers_ = 0;
  for (Unit& unit : units_) unit.reduced = false;
}

void ShardedUnits::gather(std::size_t u) {
  check_unit(u, "gather");
  const auto kind = static_cast<std::size_t>(with_grads_);
  std::vector<std::size_t>& order = order_[kind];
  if (!recorded_[kind]) {
    if (in_pass_) order.push_back(u);
  } else {
    following_ = following_ && position_ < order.size() && order[position_] == u;
  }
  ++position_;
  Unit& unit = units_[u];
  if (unit.users > 0) {
    ++unit.users;
  } else if (unit.prefetching) {
    unit.prefetching = false;
    unit.prefetch.wait();
    finish_gather(u);
    unit.users = 1;
    ++prefetched_gathers_;
  } else {
    ++waiting_gathers_;
    start_gather(u).wait();
    finish_gather(u);
    unit.users = 1;
  }
  // The unit that followed this one in the recorded order starts moving now.
  if (prefetch_ && in_pass_ && recorded_[kind] && following_ && position_ < order.size()) {
    const std::size_t next = order[position_];
    Unit& ahead = units_[next];
    if (ahead.users == 0 && !ahead.prefetching) {
      ahead.prefetch = start_gather(next);
      ahead.prefetching = true;
    }
  }
}

void ShardedUnits::release(std::size_t u) {
  check_unit(u, "release");
  Unit& unit = units_[u];
  if (unit.users == 0) {
    throw InvalidArgument("unit '" + store_.units()[u].name + "' was released but not gathered");
  }
  if (--unit.users == 0) free(unit.values);
}

float* ShardedUnits::values(std::size_t u) {
  return u < units_.size() && units_[u].users > 0 ? units_[u].values.data() : nullptr;
}

float* ShardedUnits::grads(std::size_t u) {
  if (u >= units_.size() || !in_pass_ || !with_grads_ || units_[u].reduced) return nullptr;
  Unit& unit = units_[u];
  if (unit.grads.empty()) allocate(unit.grads, store_.units()[u].count, true);
  return unit.grads.data();
}

void ShardedUnits::gradients_ready(std::size_t begin, std::size_t end) {
  if (!in_pass_ || !with_grads_) {
    throw InvalidArgument("gradients were announced outside backward");
  }
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const ParameterUnit& unit = store_.units()[u];
    const std::size_t first = unit.offset;
    const std::size_t last = unit.offset + unit.count;
    if (last <= begin || first >= end || unit.count == 0) continue;
    if (first < begin || last > end) {
      throw InvalidArgument("gradients of elements [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") cover part of unit '" + unit.name + "' [" +
                            std::to_string(first) + ", " + std::to_string(last) +
                            "); under ZeRO-3 a model announces whole units");
    }
    if (units_[u].reduced) {
      throw InvalidArgument("the gradients of unit '" + unit.name + "' were announced twice");
    }
    start_reduce(u);
  }
}

void ShardedUnits::start_reduce(std::size_t u) {
  Unit& unit = units_[u];
  // A unit without gradients this pass still takes part (its slice becomes zeros), so every
  // member makes the same calls.
  if (unit.grads.empty()) allocate(unit.grads, store_.units()[u].count, true);
  allocate(unit.reducing, packed(u), false);
  shards_.pack_all(u, unit.grads.data(), unit.reducing.data());
  free(unit.grads);
  unit.reduced = true;
  if (reduce_dtype_ == DType::kBF16) {
    unit.reducing_bf16.resize(unit.reducing.size());
    kernels::to_bf16(unit.reducing, unit.reducing_bf16);
    free(unit.reducing);
    unit.reduced_bf16.resize(shards_.chunk(u));
    unit.reduce =
        comm_.ireduce_scatter(unit.reducing_bf16.data(), unit.reduced_bf16.data(), shards_.chunk(u),
                              element_type(unit.reducing_bf16.data()), ReduceOp::kAvg, group_);
  } else {
    unit.reduce =
        comm_.ireduce_scatter(unit.reducing.data(), my_chunk(grads_slice_, u), shards_.chunk(u),
                              element_type(unit.reducing.data()), ReduceOp::kAvg, group_);
  }
  reducing_.push_back(u);
  while (reducing_.size() > kMaxReducing) finish_oldest_reduce();
}

void ShardedUnits::finish_oldest_reduce() {
  const std::size_t u = reducing_.front();
  Unit& unit = units_[u];
  unit.reduce.wait();
  reducing_.pop_front();
  free(unit.reducing);
  if (!unit.reduced_bf16.empty()) {
    kernels::to_float(unit.reduced_bf16, {my_chunk(grads_slice_, u), unit.reduced_bf16.size()});
    unit.reducing_bf16 = {};
    unit.reduced_bf16 = {};
  }
}

void ShardedUnits::end_pass() {
  if (!in_pass_) throw InvalidArgument("a pass ended that did not begin");
  if (with_grads_) {
    for (std::size_t u = 0; u < units_.size(); ++u) {
      if (!units_[u].reduced) start_reduce(u);
    }
  }
  while (!reducing_.empty()) finish_oldest_reduce();
  std::string left;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    Unit& unit = units_[u];
    if (unit.prefetching) {  // prefetched, then not used: the model took another path
      unit.prefetching = false;
      unit.prefetch.wait();
      free(unit.gathering);
      free_bf16_staging(unit);
    }
    if (unit.users > 0) {
      if (left.empty()) left = store_.units()[u].name;
      unit.users = 0;
      free(unit.values);
    }
  }
  const auto kind = static_cast<std::size_t>(with_grads_);
  recorded_[kind] = true;
  in_pass_ = false;
  if (!left.empty()) {
    throw InvalidArgument("unit '" + left + "' was gathered and not released by the end of a pass");
  }
}

void ShardedUnits::abandon_pass() noexcept {
  for (Unit& unit : units_) {
    for (Work* work : {&unit.prefetch, &unit.reduce}) {
      try {
        work->wait();
      } catch (...) {  // the pass failed already; its first error is what the caller sees
      }
      *work = Work();
    }
    unit.prefetching = false;
    unit.users = 0;
    free(unit.gathering);
    free_bf16_staging(unit);
    free(unit.values);
    unit.reducing_bf16 = {};
    unit.reduced_bf16 = {};
    free(unit.grads);
    free(unit.reducing);
  }
  reducing_.clear();
  if (in_pass_ && !recorded_[static_cast<std::size_t>(with_grads_)]) {
    order_[static_cast<std::size_t>(with_grads_)].clear();
  }
  in_pass_ = false;
}

std::vector<float> ShardedUnits::full_values() {
  if (in_pass_) throw InvalidArgument("full_values inside a pass");
  std::vector<float> out(store_.parameter_elements());
  std::vector<float> buffer;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    buffer.resize(packed(u));
    gather_unit(comm_, group_, shards_, u, my_chunk(values_slice_, u), buffer.data(),
                out.data() + store_.units()[u].offset);
  }
  return out;
}

}  // namespace shardwise::train::detail
