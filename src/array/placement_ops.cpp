#include "shardwise/array/placement_ops.hpp"

#include <algorithm>
#include <functional>

#include "detail/block_copy.hpp"
#include "detail/reshard_plan.hpp"
#include "shardwise/array/resharder.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void check_mesh_in_communicator(const Communicator& comm, const NamedSharding& sharding) {
  for (DeviceId id : sharding.mesh().device_ids()) {
    if (id < 0 || id >= comm.size()) {
      throw ShardingError(sharding.mesh().to_string() + " names device " + std::to_string(id) +
                          ", which is not a rank of the " + comm.backend() +
                          " communicator (0.." + std::to_string(comm.size() - 1) + ")");
    }
  }
}

ShardIndex whole(const Shape& shape) {
  ShardIndex index;
  for (std::int64_t size : shape) index.push_back({0, size});
  return index;
}

std::vector<std::byte> block_buffer(const ShardIndex& index, DType dtype) {
  return std::vector<std::byte>(static_cast<std::size_t>(num_elements(shape_of(index))) *
                                size_in_bytes(dtype));
}

}  // namespace

ShardedArray shard_replicated(Communicator& comm, const void* host, const Shape& global_shape,
                              DType dtype, const NamedSharding& sharding) {
  check_mesh_in_communicator(comm, sharding);
  const ShardIndex index = sharding.device_index(global_shape, comm.rank());
  std::vector<std::byte> local = block_buffer(index, dtype);
  detail::copy_box(static_cast<const std::byte*>(host), whole(global_shape), local.data(), index,
                   index, size_in_bytes(dtype));
  return ShardedArray(sharding, global_shape, dtype, comm.rank(), std::move(local));
}

ShardedArray scatter_from(Communicator& comm, Rank root, const void* host,
                          const Shape& global_shape, DType dtype, const NamedSharding& sharding) {
  check_mesh_in_communicator(comm, sharding);
  const auto& devices = sharding.mesh().device_ids();
  if (std::find(devices.begin(), devices.end(), root) == devices.end()) {
    throw InvalidArgument("scatter root " + std::to_string(root) + " is not a device of " +
                          sharding.mesh().to_string());
  }
  // The host array is one block that only the root holds.
  const std::vector<Transfer> pieces =
      plan_transfers({{root, whole(global_shape)}}, sharding, global_shape);
  const ShardIndex index = sharding.device_index(global_shape, comm.rank());
  std::vector<std::byte> local = block_buffer(index, dtype);
  detail::ReshardPlan plan = detail::compile_transfers(pieces, comm.rank(), sharding.mesh(), dtype,
                                                       whole(global_shape), index);
  detail::run_transfers(
      comm, plan, static_cast<const std::byte*>(host), [&](Rank) { return whole(global_shape); },
      dtype, local.data());
  return ShardedArray(sharding, global_shape, dtype, comm.rank(), std::move(local));
}

ShardedArray reshard(Communicator& comm, const ShardedArray& array, const NamedSharding& target) {
  return Resharder(comm).reshard(array, target);
}

void reshard_into(Communicator& comm, const ShardedArray& array, ShardedArray& target) {
  Resharder(comm).reshard_into(array, target);
}

std::vector<std::byte> gather(Communicator& comm, const ShardedArray& array) {
  const NamedSharding replicated(array.sharding().mesh(), P());
  ShardedArray whole_array = reshard(comm, array, replicated);
  return {whole_array.local_bytes().begin(), whole_array.local_bytes().end()};
}

std::vector<std::byte> gather_to(Communicator& comm, const ShardedArray& array, Rank root) {
  if (array.is_partial()) {
    // The pending reductions first, where the array lies.
    return gather_to(comm, reshard(comm, array, array.sharding()), root);
  }
  check_mesh_in_communicator(comm, array.sharding());
  const NamedSharding replicated(array.sharding().mesh(), P());
  const Shape& shape = array.global_shape();
  const std::vector<Transfer> pieces = plan_transfers(array.sharding(), replicated, shape, root);
  std::vector<std::byte> out;
  if (comm.rank() == root) out = block_buffer(whole(shape), array.dtype());
  detail::ReshardPlan plan = detail::compile_transfers(
      pieces, comm.rank(), replicated.mesh(), array.dtype(), array.local_index(), whole(shape));
  detail::run_transfers(
      comm, plan, array.local_bytes().data(),
      [&](Rank r) {
        return r == array.rank() ? array.local_index() : array.sharding().device_index(shape, r);
      },
      array.dtype(), out.data());
  return out;
}

}  // namespace shardwise
