#include "shardwise/array/resharder.hpp"

#include <algorithm>

#include "detail/reshard_plan.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void check_ranks(const Communicator& comm, const ShardedArray& array, const NamedSharding& target) {
  for (const Mesh* mesh : {&array.sharding().mesh(), &target.mesh()}) {
    for (DeviceId id : mesh->device_ids()) {
      if (id < 0 || id >= comm.size()) {
        throw ShardingError(mesh->to_string() + " names device " + std::to_string(id) +
                            ", which is not a rank of the " + comm.backend() +
                            " communicator (0.." + std::to_string(comm.size() - 1) + ")");
      }
    }
  }
  if (array.rank() != comm.rank()) {
    throw ShardingError(array.to_string() + " is rank " + std::to_string(array.rank()) +
                        "'s block, resharded on rank " + std::to_string(comm.rank()));
  }
  std::vector<DeviceId> from = array.sharding().mesh().device_ids();
  std::vector<DeviceId> to = target.mesh().device_ids();
  std::sort(from.begin(), from.end());
  std::sort(to.begin(), to.end());
  if (from != to) {
    throw ShardingError("cannot move an array from " + array.sharding().mesh().to_string() +
                        " to " + target.mesh().to_string() + ": the meshes have different devices");
  }
  target.validate(array.global_shape());
}

std::size_t combine(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// The key of a plan: the layouts, shape, dtype and pending reductions (no text).
std::size_t plan_key(const ShardedArray& array, const NamedSharding& target) {
  std::size_t key = std::hash<NamedSharding>{}(array.sharding());
  key = combine(key, std::hash<NamedSharding>{}(target));
  for (std::int64_t size : array.global_shape()) key = combine(key, static_cast<std::size_t>(size));
  key = combine(key, static_cast<std::size_t>(array.dtype()));
  for (const PartialAxis& p : array.partial_axes()) {
    key = combine(key, std::hash<std::string>{}(p.axis));
    key = combine(key, static_cast<std::size_t>(p.op));
  }
  return key;
}

// Two steps where no one collective does it: reduce every pending axis in place first.
ShardedArray reduced(Communicator& comm, const ShardedArray& array) {
  ShardedArray out(array.sharding(), array.global_shape(), array.dtype(), array.rank(),
                   std::vector<std::byte>(array.local_bytes().begin(), array.local_bytes().end()));
  const std::size_t count = array.local_bytes().size() / size_in_bytes(array.dtype());
  for (const PartialAxis& p : array.partial_axes()) {
    comm.all_reduce(out.local_bytes().data(), out.local_bytes().data(), count, array.dtype(), p.op,
                    group_along(array.sharding().mesh(), {p.axis}, array.rank()));
  }
  return out;
}

bool one_step(const ShardedArray& array, const NamedSharding& target) {
  if (!array.is_partial()) return true;
  const NamedSharding& source = array.sharding();
  const bool ops_agree =
      std::all_of(array.partial_axes().begin(), array.partial_axes().end(),
                  [&](const PartialAxis& p) { return p.op == array.partial_axes().front().op; });
  if (!ops_agree || source.evenness() != Evenness::kStrict ||
      target.evenness() != Evenness::kStrict) {
    return source == target && ops_agree;
  }
  return true;
}

}  // namespace

Resharder::Resharder(Communicator& comm) : comm_(comm) {}
Resharder::~Resharder() = default;
Resharder::Resharder(Resharder&&) noexcept = default;

detail::ReshardPlan& Resharder::plan_for(std::size_t key, const ShardedArray& array,
                                         const NamedSharding& target) {
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    it = plans_
             .emplace(key,
                      std::make_unique<detail::ReshardPlan>(detail::compile_reshard(array, target)))
             .first;
  }
  return *it->second;
}

ShardedArray Resharder::reshard(const ShardedArray& array, const NamedSharding& target) {
  check_ranks(comm_, array, target);
  // Every byte of the result is written, so it is not zero-filled first.
  ShardedArray out =
      ShardedArray::allocate(target, array.global_shape(), array.dtype(), array.rank());
  reshard_into(array, out);
  return out;
}

void Resharder::reshard_into(const ShardedArray& array, ShardedArray& target) {
  if (target.global_shape() != array.global_shape() || target.dtype() != array.dtype() ||
      target.is_partial()) {
    throw ShardingError("cannot reshard " + array.to_string() + " into " + target.to_string() +
                        ": shapes, dtypes must match and the target must have nothing pending");
  }
  if (array.rank() != comm_.rank()) {
    throw ShardingError(array.to_string() + " is rank " + std::to_string(array.rank()) +
                        "'s block, resharded on rank " + std::to_string(comm_.rank()));
  }
  if (!one_step(array, target.sharding()) ||
      (array.is_partial() && !(array.sharding().mesh() == target.sharding().mesh()))) {
    check_ranks(comm_, array, target.sharding());
    reshard_into(reduced(comm_, array), target);
    return;
  }
  // The plan key covers both layouts, the shape and the dtype: what check_ranks checks holds
  // for every later call that finds the plan, so only the first call pays for it.
  const std::size_t key = plan_key(array, target.sharding());
  if (plans_.find(key) == plans_.end()) check_ranks(comm_, array, target.sharding());
  detail::ReshardPlan* plan = nullptr;
  try {
    plan = &plan_for(key, array, target.sharding());
  } catch (const ShardingError&) {
    if (!array.is_partial()) throw;
    reshard_into(reduced(comm_, array), target);
    return;
  }
  detail::run_reshard(comm_, *plan, array, target.local_bytes().data());
}

}  // namespace shardwise
