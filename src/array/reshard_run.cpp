#include <algorithm>

#include "detail/block_copy.hpp"
#include "detail/reshard_plan.hpp"

namespace shardwise::detail {
namespace {

std::size_t element_count(const ShardIndex& box) {
  return static_cast<std::size_t>(num_elements(shape_of(box)));
}

// Counts what this rank's pieces moved, per peer, as the all_to_allv that moves them where
// ranks do not share memory counts it.
void count_pieces(Communicator& comm, const ReshardPlan& plan, std::size_t element) {
  const Rank me = comm.rank();
  const auto n = plan.group.ranks().size();
  std::vector<std::int64_t> sent(n, 0);
  std::vector<std::int64_t> received(n, 0);
  for (const Transfer& t : plan.transfers) {
    if (t.from == t.to) continue;
    const auto bytes = static_cast<std::int64_t>(element_count(t.box) * element);
    if (t.from == me) sent[static_cast<std::size_t>(plan.group.index_of(t.to))] += bytes;
    if (t.to == me) received[static_cast<std::size_t>(plan.group.index_of(t.from))] += bytes;
  }
  for (std::size_t m = 0; m < n; ++m) {
    if (sent[m] > 0 || received[m] > 0) {
      comm.counters().record(CommOp::kAllToAllv, plan.member_axes[m], sent[m], received[m]);
    }
  }
}

// Where ranks share memory, each receiver copies its pieces straight out of the senders'
// blocks (one copy per byte). Elsewhere every sender packs its pieces by receiver, one
// all_to_allv over the participants moves them, and each receiver unpacks them.
}  // namespace

void run_transfers(Communicator& comm, ReshardPlan& plan, const std::byte* source,
                   const SourceIndexOf& source_index_of, DType dtype, std::byte* out) {
  const std::size_t element = size_in_bytes(dtype);
  const Rank me = comm.rank();
  for (const Transfer& t : plan.transfers) {
    if (t.from == me && t.to == me) {
      copy_box(source, plan.source_index, out, plan.target_index, t.box, element);
    }
  }
  if (plan.group.index_of(me) < 0) return;
  const bool shared =
      comm.with_peer_buffers(source, plan.group, [&](const std::vector<const void*>& peers) {
        for (const Transfer& t : plan.transfers) {
          if (t.to != me || t.from == me) continue;
          const auto member = static_cast<std::size_t>(plan.group.index_of(t.from));
          copy_box(static_cast<const std::byte*>(peers[member]), source_index_of(t.from), out,
                   plan.target_index, t.box, element);
        }
      });
  if (shared) {
    count_pieces(comm, plan, element);
    return;
  }
  std::vector<std::size_t> cursor = plan.send.offsets;
  for (const Transfer& t : plan.transfers) {
    if (t.from != me || t.to == me) continue;
    std::size_t& at = cursor[static_cast<std::size_t>(plan.group.index_of(t.to))];
    copy_box(source, plan.source_index, plan.staging_in.data() + at * element, t.box, t.box,
             element);
    at += element_count(t.box);
  }
  AllToAllvOptions options;
  options.member_axes = plan.member_axes;
  comm.all_to_allv(plan.staging_in.data(), plan.send, plan.staging_out.data(), plan.receive, dtype,
                   plan.group, options);
  cursor = plan.receive.offsets;
  for (const Transfer& t : plan.transfers) {
    if (t.to != me || t.from == me) continue;
    std::size_t& at = cursor[static_cast<std::size_t>(plan.group.index_of(t.from))];
    copy_box(plan.staging_out.data() + at * element, t.box, out, plan.target_index, t.box, element);
    at += element_count(t.box);
  }
}

void run_reshard(Communicator& comm, ReshardPlan& plan, const ShardedArray& array, std::byte* out) {
  const std::size_t element = size_in_bytes(array.dtype());
  const std::byte* source = array.local_bytes().data();
  switch (plan.kind) {
    case ReshardKind::kLocal:
      copy_box(source, plan.source_index, out, plan.target_index, plan.target_index, element);
      return;
    case ReshardKind::kAllGather: {
      const std::size_t count = element_count(plan.source_index);
      // Where ranks share memory, members' blocks are copied straight into a strided target.
      if (!plan.direct &&
          comm.with_peer_buffers_as(CommOp::kAllGather, count, array.dtype(), source, plan.group,
                                    [&](const std::vector<const void*>& peers) {
                                      for (std::size_t m = 0; m < plan.send_boxes.size(); ++m) {
                                        copy_box(static_cast<const std::byte*>(peers[m]),
                                                 plan.send_boxes[m], out, plan.target_index,
                                                 plan.send_boxes[m], element);
                                      }
                                    })) {
        return;
      }
      std::byte* gathered = plan.direct ? out : plan.staging_out.data();
      comm.all_gather(source, gathered, count, array.dtype(), plan.group);
      if (plan.direct) return;
      for (std::size_t m = 0; m < plan.send_boxes.size(); ++m) {
        copy_box(gathered + m * count * element, plan.send_boxes[m], out, plan.target_index,
                 plan.send_boxes[m], element);
      }
      return;
    }
    case ReshardKind::kAllToAll: {
      const std::size_t piece = element_count(plan.send_boxes.front());
      // Where ranks share memory and the pieces need packing or unpacking, each member copies
      // its pieces straight out of its peers' blocks: one copy per byte.
      if ((plan.pack || plan.unpack) &&
          comm.with_peer_buffers_as(CommOp::kAllToAll, piece, array.dtype(), source, plan.group,
                                    [&](const std::vector<const void*>& peers) {
                                      for (std::size_t m = 0; m < plan.receive_boxes.size(); ++m) {
                                        copy_box(static_cast<const std::byte*>(peers[m]),
                                                 plan.member_source_index[m], out,
                                                 plan.target_index, plan.receive_boxes[m], element);
                                      }
                                    })) {
        return;
      }
      const std::byte* in = source;
      if (plan.pack) {
        for (std::size_t m = 0; m < plan.send_boxes.size(); ++m) {
          copy_box(source, plan.source_index, plan.staging_in.data() + m * piece * element,
                   plan.send_boxes[m], plan.send_boxes[m], element);
        }
        in = plan.staging_in.data();
      }
      std::byte* received = plan.unpack ? plan.staging_out.data() : out;
      comm.all_to_all(in, received, piece, array.dtype(), plan.group);
      if (!plan.unpack) return;
      for (std::size_t m = 0; m < plan.receive_boxes.size(); ++m) {
        copy_box(plan.staging_out.data() + m * piece * element, plan.receive_boxes[m], out,
                 plan.target_index, plan.receive_boxes[m], element);
      }
      return;
    }
    case ReshardKind::kReduceScatter: {
      const auto n = static_cast<std::int64_t>(plan.group.ranks().size());
      const ShardIndex& index = plan.source_index;
      const std::byte* in = source;
      if (plan.pack) {
        const std::int64_t slice = index[plan.dim].size() / n;
        std::size_t offset = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          ShardIndex box = index;
          box[plan.dim] = {index[plan.dim].start + i * slice,
                           index[plan.dim].start + (i + 1) * slice};
          copy_box(source, index, plan.staging_in.data() + offset, box, box, element);
          offset += element_count(box) * element;
        }
        in = plan.staging_in.data();
      }
      comm.reduce_scatter(in, out, element_count(plan.target_index), array.dtype(), plan.op,
                          plan.group);
      return;
    }
    case ReshardKind::kAllReduce:
      comm.all_reduce(source, out, element_count(plan.source_index), array.dtype(), plan.op,
                      plan.group);
      return;
    case ReshardKind::kTransfer:
      run_transfers(
          comm, plan, source,
          [&](Rank r) {
            return r == array.rank() ? plan.source_index
                                     : array.sharding().device_index(array.global_shape(), r);
          },
          array.dtype(), out);
      return;
  }
}

}  // namespace shardwise::detail
