#include "detail/reshard_plan.hpp"

#include <algorithm>
#include <optional>

#include "detail/block_copy.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

std::size_t element_count(const ShardIndex& box) {
  return static_cast<std::size_t>(num_elements(shape_of(box)));
}

bool contains(const ShardIndex& outer, const ShardIndex& inner) {
  if (is_empty(inner)) return true;
  for (std::size_t d = 0; d < outer.size(); ++d) {
    if (inner[d].start < outer[d].start || inner[d].stop > outer[d].stop) return false;
  }
  return true;
}

bool in_mesh_order(const Mesh& mesh, const std::vector<std::string>& axes) {
  for (std::size_t i = 1; i < axes.size(); ++i) {
    if (mesh.axis_index(axes[i - 1]) >= mesh.axis_index(axes[i])) return false;
  }
  return true;
}

// Whether `longer` is `shorter` followed by more axes; those axes.
std::optional<std::vector<std::string>> suffix_after(const std::vector<std::string>& longer,
                                                     const std::vector<std::string>& shorter) {
  if (longer.size() <= shorter.size() ||
      !std::equal(shorter.begin(), shorter.end(), longer.begin())) {
    return std::nullopt;
  }
  return std::vector<std::string>(longer.begin() + static_cast<std::ptrdiff_t>(shorter.size()),
                                  longer.end());
}

// The dimensions whose entries differ.
std::vector<std::size_t> differing_dims(const PartitionSpec& a, const PartitionSpec& b,
                                        std::size_t rank) {
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < rank; ++d) {
    if (a.entry(d).axes() != b.entry(d).axes()) dims.push_back(d);
  }
  return dims;
}

// The mesh axes along which two ranks differ: "data+model".
std::string differing_axes(const Mesh& mesh, Rank a, Rank b) {
  const std::vector<std::int64_t> x = mesh.coords_of(a);
  const std::vector<std::int64_t> y = mesh.coords_of(b);
  std::string label;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i]) label += (label.empty() ? "" : "+") + mesh.axis_names()[i];
  }
  return label;
}

bool strict(const NamedSharding& a, const NamedSharding& b) {
  return a.evenness() == Evenness::kStrict && b.evenness() == Evenness::kStrict &&
         a.mesh() == b.mesh();
}

// Every device's target block lies inside its own source block: no data crosses ranks.
bool is_local(const NamedSharding& source, const NamedSharding& target, const Shape& shape) {
  const std::vector<DeviceShard> from = source.devices_indices_map(shape);
  for (const DeviceShard& to : target.devices_indices_map(shape)) {
    const auto it = std::find_if(from.begin(), from.end(),
                                 [&](const DeviceShard& s) { return s.device == to.device; });
    if (it == from.end() || !contains(it->index, to.index)) return false;
  }
  return true;
}

bool compile_all_gather(ReshardPlan& plan, const ShardedArray& array, const NamedSharding& target) {
  const NamedSharding& source = array.sharding();
  if (!strict(source, target)) return false;
  const std::size_t rank = array.global_shape().size();
  const std::vector<std::size_t> dims = differing_dims(source.spec(), target.spec(), rank);
  if (dims.size() != 1) return false;
  const std::size_t d = dims.front();
  const auto gathered = suffix_after(source.spec().entry(d).axes(), target.spec().entry(d).axes());
  if (!gathered || !in_mesh_order(source.mesh(), *gathered)) return false;
  plan.kind = ReshardKind::kAllGather;
  plan.group = group_along(source.mesh(), *gathered, array.rank());
  for (Rank member : plan.group.ranks()) {
    plan.send_boxes.push_back(source.device_index(array.global_shape(), member));
  }
  // Member blocks follow one another in the target when no dimension before d is cut.
  plan.direct = true;
  for (std::size_t e = 0; e < d; ++e) plan.direct = plan.direct && plan.target_index[e].size() == 1;
  if (!plan.direct) {
    plan.staging_out.resize(element_count(plan.source_index) * plan.group.ranks().size() *
                            size_in_bytes(array.dtype()));
  }
  return true;
}

// Whether `boxes` lie one after another, in order, in the row-major block `block`: then the
// block itself is the collective's buffer and nothing is packed or unpacked.
bool lie_in_order(const ShardIndex& block, const std::vector<ShardIndex>& boxes) {
  std::int64_t next = 0;
  for (const ShardIndex& box : boxes) {
    // A box is one run when every dimension after its first cut one is whole.
    std::size_t cut = 0;
    while (cut + 1 < box.size() && box[cut].size() == 1) ++cut;
    for (std::size_t e = cut + 1; e < box.size(); ++e) {
      if (box[e].start != block[e].start || box[e].stop != block[e].stop) return false;
    }
    std::int64_t offset = 0;
    for (std::size_t e = 0; e < box.size(); ++e) {
      offset = offset * block[e].size() + (box[e].start - block[e].start);
    }
    if (offset != next) return false;
    next += num_elements(shape_of(box));
  }
  return true;
}

bool compile_all_to_all(ReshardPlan& plan, const ShardedArray& array, const NamedSharding& target) {
  const NamedSharding& source = array.sharding();
  if (!strict(source, target)) return false;
  const std::size_t rank = array.global_shape().size();
  const std::vector<std::size_t> dims = differing_dims(source.spec(), target.spec(), rank);
  if (dims.size() != 2) return false;
  for (const auto& [from, to] : {std::pair{dims[0], dims[1]}, std::pair{dims[1], dims[0]}}) {
    const auto left =
        suffix_after(source.spec().entry(from).axes(), target.spec().entry(from).axes());
    const auto arrived =
        suffix_after(target.spec().entry(to).axes(), source.spec().entry(to).axes());
    if (!left || !arrived || left->size() != 1 || *left != *arrived) continue;
    const Group group = group_along(source.mesh(), *left, array.rank());
    const Shape& shape = array.global_shape();
    std::vector<ShardIndex> sends;
    std::vector<ShardIndex> receives;
    for (Rank member : group.ranks()) {
      sends.push_back(intersect(plan.source_index, target.device_index(shape, member)));
      receives.push_back(intersect(plan.target_index, source.device_index(shape, member)));
    }
    const std::size_t piece = element_count(sends.front());
    for (std::size_t m = 0; m < sends.size(); ++m) {
      if (element_count(sends[m]) != piece || element_count(receives[m]) != piece) return false;
    }
    plan.kind = ReshardKind::kAllToAll;
    plan.group = group;
    plan.pack = !lie_in_order(plan.source_index, sends);
    plan.unpack = !lie_in_order(plan.target_index, receives);
    plan.send_boxes = std::move(sends);
    plan.receive_boxes = std::move(receives);
    for (Rank member : group.ranks()) {
      plan.member_source_index.push_back(source.device_index(shape, member));
    }
    const std::size_t bytes = piece * group.ranks().size() * size_in_bytes(array.dtype());
    if (plan.pack) plan.staging_in.resize(bytes);
    if (plan.unpack) plan.staging_out.resize(bytes);
    return true;
  }
  return false;
}

// Partial -> Shard: the target is the source spec with exactly the partial axes (in mesh
// order) appended to one dimension, every partial axis reducing with one op.
bool compile_reduce_scatter(ReshardPlan& plan, const ShardedArray& array,
                            const NamedSharding& target) {
  const NamedSharding& source = array.sharding();
  if (!strict(source, target)) return false;
  const ReduceOp op = array.partial_axes().front().op;
  std::vector<std::string> partial;
  for (const PartialAxis& p : array.partial_axes()) {
    if (p.op != op) return false;
    partial.push_back(p.axis);
  }
  const Mesh& mesh = source.mesh();
  std::sort(partial.begin(), partial.end(), [&](const std::string& a, const std::string& b) {
    return mesh.axis_index(a) < mesh.axis_index(b);
  });
  const std::size_t rank = array.global_shape().size();
  const std::vector<std::size_t> dims = differing_dims(source.spec(), target.spec(), rank);
  if (dims.size() != 1) return false;
  const auto added =
      suffix_after(target.spec().entry(dims[0]).axes(), source.spec().entry(dims[0]).axes());
  if (!added || *added != partial) return false;
  plan.kind = ReshardKind::kReduceScatter;
  plan.op = op;
  plan.dim = dims[0];
  plan.group = group_along(mesh, partial, array.rank());
  // The slices lie one after another when no dimension before `dim` is cut.
  for (std::size_t d = 0; d < plan.dim; ++d)
    plan.pack = plan.pack || plan.source_index[d].size() != 1;
  if (plan.pack) plan.staging_in.resize(array.local_bytes().size());
  return true;
}

bool compile_all_reduce(ReshardPlan& plan, const ShardedArray& array, const NamedSharding& target) {
  const NamedSharding& source = array.sharding();
  if (source != target) return false;
  const ReduceOp op = array.partial_axes().front().op;
  std::vector<std::string> partial;
  for (const PartialAxis& p : array.partial_axes()) {
    if (p.op != op) return false;
    partial.push_back(p.axis);
  }
  plan.kind = ReshardKind::kAllReduce;
  plan.op = op;
  plan.group = group_along(source.mesh(), partial, array.rank());
  return true;
}

}  // namespace

std::string to_string(ReshardKind kind) {
  switch (kind) {
    case ReshardKind::kLocal: return "local";
    case ReshardKind::kAllGather: return "all_gather";
    case ReshardKind::kAllToAll: return "all_to_all";
    case ReshardKind::kReduceScatter: return "reduce_scatter";
    case ReshardKind::kAllReduce: return "all_reduce";
    case ReshardKind::kTransfer: return "transfer";
  }
  return "?";
}

ReshardPlan compile_reshard(const ShardedArray& array, const NamedSharding& target) {
  ReshardPlan plan;
  plan.source_index = array.local_index();
  plan.target_index = target.device_index(array.global_shape(), array.rank());
  if (array.is_partial()) {
    if (compile_reduce_scatter(plan, array, target) || compile_all_reduce(plan, array, target)) {
      return plan;
    }
    throw ShardingError("internal: a partial reshard that needs two steps reached the compiler");
  }
  if (is_local(array.sharding(), target, array.global_shape())) {
    plan.kind = ReshardKind::kLocal;
    return plan;
  }
  if (compile_all_gather(plan, array, target) || compile_all_to_all(plan, array, target)) {
    return plan;
  }
  return compile_transfers(plan_transfers(array.sharding(), target, array.global_shape()),
                           array.rank(), target.mesh(), array.dtype(), plan.source_index,
                           plan.target_index);
}

ReshardPlan compile_transfers(const std::vector<Transfer>& all, Rank me, const Mesh& mesh,
                              DType dtype, ShardIndex source_index, ShardIndex target_index) {
  ReshardPlan plan;
  plan.kind = ReshardKind::kTransfer;
  plan.source_index = std::move(source_index);
  plan.target_index = std::move(target_index);
  // Only the ranks that send or receive take part.
  std::vector<Rank> participants;
  for (const Transfer& t : all) {
    if (t.from == t.to) continue;
    participants.push_back(t.from);
    participants.push_back(t.to);
  }
  std::sort(participants.begin(), participants.end());
  participants.erase(std::unique(participants.begin(), participants.end()), participants.end());
  plan.group = Group{participants, "reshard"};
  for (const Transfer& t : all) {
    if (t.from == me || t.to == me) plan.transfers.push_back(t);
  }
  if (plan.group.index_of(me) < 0) return plan;
  const auto n = participants.size();
  const std::size_t element = size_in_bytes(dtype);
  plan.send = {std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  plan.receive = {std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  for (const Transfer& t : plan.transfers) {
    if (t.from == t.to) continue;
    if (t.from == me) {
      plan.send.counts[static_cast<std::size_t>(plan.group.index_of(t.to))] += element_count(t.box);
    }
    if (t.to == me) {
      plan.receive.counts[static_cast<std::size_t>(plan.group.index_of(t.from))] +=
          element_count(t.box);
    }
  }
  for (std::size_t r = 1; r < n; ++r) {
    plan.send.offsets[r] = plan.send.offsets[r - 1] + plan.send.counts[r - 1];
    plan.receive.offsets[r] = plan.receive.offsets[r - 1] + plan.receive.counts[r - 1];
  }
  plan.staging_in.resize((plan.send.offsets[n - 1] + plan.send.counts[n - 1]) * element);
  plan.staging_out.resize((plan.receive.offsets[n - 1] + plan.receive.counts[n - 1]) * element);
  for (Rank r : participants) {
    plan.member_axes.push_back(r == me ? "" : differing_axes(mesh, me, r));
  }
  return plan;
}

}  // namespace shardwise::detail
