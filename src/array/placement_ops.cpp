#include "shardwise/array/placement_ops.hpp"

#include <algorithm>
#include <functional>

#include "detail/block_copy.hpp"
#include "shardwise/array/transfer_plan.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void check_mesh_covers_ranks(const Communicator& comm, const NamedSharding& sharding) {
  const Mesh& mesh = sharding.mesh();
  bool covers = mesh.size() == comm.size();
  for (DeviceId id : mesh.device_ids()) covers = covers && id >= 0 && id < comm.size();
  if (!covers) {
    throw ShardingError(mesh.to_string() + " does not have the ranks 0.." +
                        std::to_string(comm.size() - 1) + " of the " + comm.backend() +
                        " communicator as its devices");
  }
}

ShardIndex whole(const Shape& shape) {
  ShardIndex index;
  for (std::int64_t size : shape) index.push_back({0, size});
  return index;
}

std::size_t element_count(const ShardIndex& box) {
  return static_cast<std::size_t>(num_elements(shape_of(box)));
}

// The mesh axes along which two ranks' coordinates differ: "data+model".
std::string differing_axes(const Mesh& mesh, Rank a, Rank b) {
  const std::vector<std::int64_t> x = mesh.coords_of(a);
  const std::vector<std::int64_t> y = mesh.coords_of(b);
  std::string label;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i]) label += (label.empty() ? "" : "+") + mesh.axis_names()[i];
  }
  return label;
}

// The label of each rank's bytes, as seen from this rank: the mesh axes along which the two
// differ. An all_to_allv counts with them, so a reshard's bytes land under the axes they
// crossed, the same on every backend.
std::vector<std::string> peer_axes(const Mesh& mesh, Rank me, int ranks) {
  std::vector<std::string> labels;
  for (Rank r = 0; r < ranks; ++r) labels.push_back(r == me ? "" : differing_axes(mesh, me, r));
  return labels;
}

// Counts what this rank's pieces of a plan moved, per peer, as the all_to_allv that moves them
// where ranks do not share memory counts it.
void count_pieces(Communicator& comm, const Mesh& mesh, const std::vector<Transfer>& plan,
                  std::size_t element) {
  const Rank me = comm.rank();
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> sent(n, 0);
  std::vector<std::int64_t> received(n, 0);
  for (const Transfer& t : plan) {
    if (t.from == t.to || (t.from != me && t.to != me)) continue;
    const auto bytes = static_cast<std::int64_t>(element_count(t.box) * element);
    if (t.from == me) sent[static_cast<std::size_t>(t.to)] += bytes;
    if (t.to == me) received[static_cast<std::size_t>(t.from)] += bytes;
  }
  const std::vector<std::string> labels = peer_axes(mesh, me, comm.size());
  for (std::size_t r = 0; r < n; ++r) {
    if (sent[r] > 0 || received[r] > 0) {
      comm.counters().record(CommOp::kAllToAllv, labels[r], sent[r], received[r]);
    }
  }
}

// Runs a plan. Where ranks share memory, each receiver copies its pieces straight out of the
// senders' blocks (one copy per byte). Elsewhere every rank packs what it sends, grouped by
// receiver in plan order, into one buffer; one all_to_allv (MPI's own collective) moves them
// all; then the local pieces are copied and each receiver unpacks in the same order.
void execute(Communicator& comm, const Mesh& mesh, const std::vector<Transfer>& plan, DType dtype,
             const std::byte* source, const std::function<ShardIndex(Rank)>& source_index_of,
             std::byte* target, const ShardIndex& target_index) {
  const std::size_t element = size_in_bytes(dtype);
  const Rank me = comm.rank();
  const ShardIndex source_index = source_index_of(me);
  const Group world = world_group(comm.size());
  const bool shared =
      comm.with_peer_buffers(source, world, [&](const std::vector<const void*>& peers) {
        for (const Transfer& t : plan) {
          if (t.to != me) continue;
          detail::copy_box(static_cast<const std::byte*>(peers[static_cast<std::size_t>(t.from)]),
                           t.from == me ? source_index : source_index_of(t.from), target,
                           target_index, t.box, element);
        }
      });
  if (shared) {
    count_pieces(comm, mesh, plan, element);
    return;
  }
  const auto n = static_cast<std::size_t>(comm.size());
  BlockLayout send{std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  BlockLayout receive{std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  for (const Transfer& t : plan) {
    if (t.from == t.to) continue;
    if (t.from == me) send.counts[static_cast<std::size_t>(t.to)] += element_count(t.box);
    if (t.to == me) receive.counts[static_cast<std::size_t>(t.from)] += element_count(t.box);
  }
  for (std::size_t r = 1; r < n; ++r) {
    send.offsets[r] = send.offsets[r - 1] + send.counts[r - 1];
    receive.offsets[r] = receive.offsets[r - 1] + receive.counts[r - 1];
  }
  std::vector<std::byte> outgoing((send.offsets[n - 1] + send.counts[n - 1]) * element);
  std::vector<std::byte> incoming((receive.offsets[n - 1] + receive.counts[n - 1]) * element);
  std::vector<std::size_t> cursor = send.offsets;
  for (const Transfer& t : plan) {
    if (t.from != me || t.to == me) continue;
    std::size_t& at = cursor[static_cast<std::size_t>(t.to)];
    detail::copy_box(source, source_index, outgoing.data() + at * element, t.box, t.box, element);
    at += element_count(t.box);
  }
  AllToAllvOptions options;
  options.member_axes = peer_axes(mesh, me, comm.size());
  comm.all_to_allv(outgoing.data(), send, incoming.data(), receive, dtype, world, options);
  for (const Transfer& t : plan) {
    if (t.from == me && t.to == me) {
      detail::copy_box(source, source_index, target, target_index, t.box, element);
    }
  }
  cursor = receive.offsets;
  for (const Transfer& t : plan) {
    if (t.to != me || t.from == me) continue;
    std::size_t& at = cursor[static_cast<std::size_t>(t.from)];
    detail::copy_box(incoming.data() + at * element, t.box, target, target_index, t.box, element);
    at += element_count(t.box);
  }
}

// Where each rank's block of the array lies.
std::function<ShardIndex(Rank)> block_index_of(const ShardedArray& array) {
  return [&array](Rank rank) {
    return rank == array.rank() ? array.local_index()
                                : array.sharding().device_index(array.global_shape(), rank);
  };
}

std::vector<std::byte> block_buffer(const ShardIndex& index, DType dtype) {
  return std::vector<std::byte>(element_count(index) * size_in_bytes(dtype));
}

// The group along `axes`, labelled for accounting.
Group axis_group(const ShardedArray& array, const std::vector<std::string>& axes) {
  return group_along(array.sharding().mesh(), axes, array.rank());
}

// If `target` is the source spec with exactly the partial axes appended (in mesh order) to one
// dimension, and every partial axis reduces with one op, that dimension.
std::optional<std::size_t> reduce_scatter_dimension(const ShardedArray& array,
                                                    const NamedSharding& target) {
  const NamedSharding& source = array.sharding();
  if (source.mesh() != target.mesh() || source.evenness() == Evenness::kUneven ||
      target.evenness() == Evenness::kUneven) {
    return std::nullopt;
  }
  const ReduceOp op = array.partial_axes().front().op;
  std::vector<std::string> partial;
  for (const PartialAxis& p : array.partial_axes()) {
    if (p.op != op) return std::nullopt;
    partial.push_back(p.axis);
  }
  const Mesh& mesh = source.mesh();
  std::sort(partial.begin(), partial.end(), [&](const std::string& a, const std::string& b) {
    return mesh.axis_index(a) < mesh.axis_index(b);
  });
  std::optional<std::size_t> found;
  const std::size_t rank = array.global_shape().size();
  for (std::size_t d = 0; d < rank; ++d) {
    const auto& from = source.spec().entry(d).axes();
    const auto& to = target.spec().entry(d).axes();
    if (from == to) continue;
    std::vector<std::string> expected = from;
    expected.insert(expected.end(), partial.begin(), partial.end());
    if (to != expected || found) return std::nullopt;
    found = d;
  }
  return found;
}

// Reduce-scatter over the partial axes: the local block, cut into group-size slices along
// `dim`, reduces slice i onto member i.
ShardedArray reduce_scatter_partial(Communicator& comm, const ShardedArray& array,
                                    const NamedSharding& target, std::size_t dim) {
  std::vector<std::string> axes;
  for (const PartialAxis& p : array.partial_axes()) axes.push_back(p.axis);
  const Group group = axis_group(array, axes);
  const auto n = static_cast<std::size_t>(group.size());
  const ShardIndex& index = array.local_index();
  const std::size_t element = size_in_bytes(array.dtype());
  // The slices must lie one after another: they already do when every dimension before `dim`
  // is one element long; otherwise they are packed.
  bool contiguous = true;
  for (std::size_t d = 0; d < dim; ++d) contiguous = contiguous && index[d].size() == 1;
  std::vector<std::byte> packed;
  if (!contiguous) {
    packed.resize(array.local_bytes().size());
    const std::int64_t slice = index[dim].size() / static_cast<std::int64_t>(n);
    std::size_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      ShardIndex box = index;
      box[dim] = {index[dim].start + static_cast<std::int64_t>(i) * slice,
                  index[dim].start + static_cast<std::int64_t>(i + 1) * slice};
      detail::copy_box(array.local_bytes().data(), index, packed.data() + offset, box, box,
                       element);
      offset += element_count(box) * element;
    }
  }
  const ShardIndex target_index = target.device_index(array.global_shape(), array.rank());
  std::vector<std::byte> local = block_buffer(target_index, array.dtype());
  comm.reduce_scatter(contiguous ? array.local_bytes().data() : packed.data(), local.data(),
                      element_count(target_index), array.dtype(), array.partial_axes().front().op,
                      group);
  return ShardedArray(target, array.global_shape(), array.dtype(), array.rank(), std::move(local));
}

// All-reduce over each partial axis in turn: the same sharding with nothing pending.
ShardedArray all_reduce_partial(Communicator& comm, const ShardedArray& array) {
  std::vector<std::byte> local(array.local_bytes().begin(), array.local_bytes().end());
  const std::size_t count = element_count(array.local_index());
  for (const PartialAxis& p : array.partial_axes()) {
    comm.all_reduce(local.data(), local.data(), count, array.dtype(), p.op,
                    axis_group(array, {p.axis}));
  }
  return ShardedArray(array.sharding(), array.global_shape(), array.dtype(), array.rank(),
                      std::move(local));
}

}  // namespace

ShardedArray shard_replicated(Communicator& comm, const void* host, const Shape& global_shape,
                              DType dtype, const NamedSharding& sharding) {
  check_mesh_covers_ranks(comm, sharding);
  const ShardIndex index = sharding.device_index(global_shape, comm.rank());
  std::vector<std::byte> local = block_buffer(index, dtype);
  detail::copy_box(static_cast<const std::byte*>(host), whole(global_shape), local.data(), index,
                   index, size_in_bytes(dtype));
  return ShardedArray(sharding, global_shape, dtype, comm.rank(), std::move(local));
}

ShardedArray scatter_from(Communicator& comm, Rank root, const void* host,
                          const Shape& global_shape, DType dtype, const NamedSharding& sharding) {
  check_mesh_covers_ranks(comm, sharding);
  if (root < 0 || root >= comm.size()) {
    throw InvalidArgument("scatter root " + std::to_string(root) + " is not a rank of 0.." +
                          std::to_string(comm.size() - 1));
  }
  // The host array as one block that only the root holds.
  std::vector<Transfer> plan;
  for (const DeviceShard& shard : sharding.devices_indices_map(global_shape)) {
    if (is_empty(shard.index)) continue;
    plan.push_back({root, static_cast<Rank>(shard.device), shard.index});
  }
  const ShardIndex index = sharding.device_index(global_shape, comm.rank());
  std::vector<std::byte> local = block_buffer(index, dtype);
  execute(
      comm, sharding.mesh(), plan, dtype, static_cast<const std::byte*>(host),
      [&](Rank) { return whole(global_shape); }, local.data(), index);
  return ShardedArray(sharding, global_shape, dtype, comm.rank(), std::move(local));
}

ShardedArray reshard(Communicator& comm, const ShardedArray& array, const NamedSharding& target) {
  check_mesh_covers_ranks(comm, array.sharding());
  check_mesh_covers_ranks(comm, target);
  target.validate(array.global_shape());
  if (array.is_partial()) {
    if (const auto dim = reduce_scatter_dimension(array, target)) {
      return reduce_scatter_partial(comm, array, target, *dim);
    }
    return reshard(comm, all_reduce_partial(comm, array), target);
  }
  ShardedArray out(
      target, array.global_shape(), array.dtype(), comm.rank(),
      block_buffer(target.device_index(array.global_shape(), comm.rank()), array.dtype()));
  reshard_into(comm, array, out);
  return out;
}

void reshard_into(Communicator& comm, const ShardedArray& array, ShardedArray& target) {
  if (target.global_shape() != array.global_shape() || target.dtype() != array.dtype() ||
      target.is_partial()) {
    throw ShardingError("cannot reshard " + array.to_string() + " into " + target.to_string() +
                        ": shapes, dtypes must match and the target must have nothing pending");
  }
  if (array.is_partial()) {
    ShardedArray reduced = reshard(comm, array, target.sharding());
    std::copy(reduced.local_bytes().begin(), reduced.local_bytes().end(),
              target.local_bytes().begin());
    return;
  }
  check_mesh_covers_ranks(comm, array.sharding());
  check_mesh_covers_ranks(comm, target.sharding());
  const std::vector<Transfer> plan =
      plan_transfers(array.sharding(), target.sharding(), array.global_shape());
  execute(comm, target.sharding().mesh(), plan, array.dtype(), array.local_bytes().data(),
          block_index_of(array), target.local_bytes().data(), target.local_index());
}

std::vector<std::byte> gather(Communicator& comm, const ShardedArray& array) {
  const NamedSharding replicated(array.sharding().mesh(), P());
  ShardedArray whole_array = reshard(comm, array, replicated);
  return {whole_array.local_bytes().begin(), whole_array.local_bytes().end()};
}

std::vector<std::byte> gather_to(Communicator& comm, const ShardedArray& array, Rank root) {
  if (array.is_partial()) return gather_to(comm, all_reduce_partial(comm, array), root);
  check_mesh_covers_ranks(comm, array.sharding());
  const NamedSharding replicated(array.sharding().mesh(), P());
  const std::vector<Transfer> plan =
      plan_transfers(array.sharding(), replicated, array.global_shape(), root);
  std::vector<std::byte> out;
  if (comm.rank() == root)
    out.resize(element_count(whole(array.global_shape())) * size_in_bytes(array.dtype()));
  execute(comm, array.sharding().mesh(), plan, array.dtype(), array.local_bytes().data(),
          block_index_of(array), out.data(), whole(array.global_shape()));
  return out;
}

}  // namespace shardwise
