#include "shardwise/comm/communicator.hpp"

#include <algorithm>
#include <cstring>

#include "detail/checks.hpp"
#include "detail/comm_backend.hpp"
#include "detail/traffic.hpp"
#include "detail/work_state.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using detail::OpRequest;

// Resets `request` for a new operation; assigning (rather than building anew) keeps the
// capacity of its vectors.
void reset(OpRequest& request, CommOp op, const Group& group, const CommOptions& options) {
  request.op = op;
  request.blocking = false;
  request.buffers.clear();
  request.dtype = DType::kF32;
  request.reduce = ReduceOp::kSum;
  request.root = -1;
  request.pairs.clear();
  request.send.counts.clear();
  request.send.offsets.clear();
  request.receive.counts.clear();
  request.receive.offsets.clear();
  request.group = group;
  request.options = options;
  request.messages.clear();
  request.payloads.clear();
  request.member_axes.clear();
  request.p2p_axes = "p2p";
}

void check_reduction(DType dtype, ReduceOp op, const char* name) {
  if (dtype == DType::kBool && op == ReduceOp::kAvg) {
    throw InvalidArgument(std::string(name) +
                          ": avg of bool is not defined; use sum (or), max (or) or min (and)");
  }
}

std::string mesh_axes_text(const Mesh& mesh, const std::vector<std::string>& axes) {
  std::string text = mesh.to_string() + " along";
  for (const std::string& axis : axes) text += " " + axis;
  return text;
}

// Marks the operation started inside its scope as one the caller waits on at once.
class BlockingCall {
 public:
  explicit BlockingCall(bool& flag) : flag_(flag) { flag_ = true; }
  ~BlockingCall() { flag_ = false; }
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;

 private:
  bool& flag_;
};

}  // namespace

Communicator::Communicator(std::unique_ptr<detail::CommBackend> backend)
    : backend_(std::move(backend)), scratch_(std::make_unique<detail::CallScratch>()) {}

Communicator::~Communicator() = default;

Rank Communicator::rank() const { return backend_->rank(); }
int Communicator::size() const { return backend_->size(); }
std::string Communicator::backend() const { return backend_->name(); }
int Communicator::max_tag() const { return backend_->max_tag(); }
const std::vector<Rank>& Communicator::world_ranks() const { return backend_->world_ranks(); }

namespace {}  // namespace

namespace detail {

// What blocking calls reuse from one call to the next: the request and the byte records.
struct CallScratch {
  OpRequest request;
  std::vector<TrafficRecord> traffic;
};

}  // namespace detail

namespace {

// The request an operation fills: the communicator's reused one for a blocking call, which
// runs to completion before the next call, a fresh one (`fresh`) for one left in flight.
OpRequest& prepare(detail::CallScratch& scratch, bool blocking, OpRequest& fresh, CommOp op,
                   const Group& group, const CommOptions& options) {
  OpRequest& request = blocking ? scratch.request : fresh;
  reset(request, op, group, options);
  return request;
}

// Starts a validated request and counts its bytes once it has succeeded. A blocking call runs
// to completion here and returns a finished Work.
Work launch(detail::CommBackend& backend, ByteCounters& counters, detail::CallScratch& scratch,
            OpRequest& request, int member, bool blocking) {
  request.blocking = blocking;
  if (blocking) {
    backend.run_blocking(request);
    detail::traffic_of(request, member, scratch.traffic);
    for (const detail::TrafficRecord& r : scratch.traffic) {
      counters.record(r.op, r.axes, r.sent, r.received);
    }
    return Work();
  }
  std::vector<detail::TrafficRecord> records;
  detail::traffic_of(request, member, records);
  Work work = backend.start(std::move(request));
  if (const auto& state = detail::WorkAccess::state(work); state && !records.empty()) {
    state->set_on_success([&counters, records = std::move(records)] {
      for (const detail::TrafficRecord& r : records) {
        counters.record(r.op, r.axes, r.sent, r.received);
      }
    });
  } else if (!state) {
    for (const detail::TrafficRecord& r : records) {
      counters.record(r.op, r.axes, r.sent, r.received);
    }
  }
  return work;
}

}  // namespace

Work Communicator::iall_reduce_coalesced(const std::vector<CoalescedBuffer>& buffers, DType dtype,
                                         ReduceOp op, const Group& group,
                                         const AllReduceOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "all_reduce");
  detail::check_options(options, "all_reduce");
  check_reduction(dtype, op, "all_reduce");
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kAllReduce, group, options);
  request.buffers = buffers;
  request.dtype = dtype;
  request.reduce = op;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

Work Communicator::iall_reduce(const void* in, void* out, std::size_t count, DType dtype,
                               ReduceOp op, const Group& group, const AllReduceOptions& options) {
  return iall_reduce_coalesced({{in, out, count}}, dtype, op, group, options);
}

void Communicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype,
                              ReduceOp op, const Group& group, const AllReduceOptions& options) {
  BlockingCall blocking(blocking_);
  iall_reduce(in, out, count, dtype, op, group, options).wait();
}

void Communicator::all_reduce_coalesced(const std::vector<CoalescedBuffer>& buffers, DType dtype,
                                        ReduceOp op, const Group& group,
                                        const AllReduceOptions& options) {
  BlockingCall blocking(blocking_);
  iall_reduce_coalesced(buffers, dtype, op, group, options).wait();
}

Work Communicator::iall_gather(const void* in, void* out, std::size_t count, DType dtype,
                               const Group& group, const AllGatherOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "all_gather");
  detail::check_options(options, "all_gather");
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kAllGather, group, options);
  request.buffers = {{in, out, count}};
  request.dtype = dtype;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::all_gather(const void* in, void* out, std::size_t count, DType dtype,
                              const Group& group, const AllGatherOptions& options) {
  BlockingCall blocking(blocking_);
  iall_gather(in, out, count, dtype, group, options).wait();
}

Work Communicator::ireduce_scatter_coalesced(const std::vector<CoalescedBuffer>& buffers,
                                             DType dtype, ReduceOp op, const Group& group,
                                             const ReduceScatterOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "reduce_scatter");
  detail::check_options(options, "reduce_scatter");
  check_reduction(dtype, op, "reduce_scatter");
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kReduceScatter, group, options);
  request.buffers = buffers;
  request.dtype = dtype;
  request.reduce = op;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

Work Communicator::ireduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                                   ReduceOp op, const Group& group,
                                   const ReduceScatterOptions& options) {
  return ireduce_scatter_coalesced({{in, out, count}}, dtype, op, group, options);
}

void Communicator::reduce_scatter(const void* in, void* out, std::size_t count, DType dtype,
                                  ReduceOp op, const Group& group,
                                  const ReduceScatterOptions& options) {
  BlockingCall blocking(blocking_);
  ireduce_scatter(in, out, count, dtype, op, group, options).wait();
}

void Communicator::reduce_scatter_coalesced(const std::vector<CoalescedBuffer>& buffers,
                                            DType dtype, ReduceOp op, const Group& group,
                                            const ReduceScatterOptions& options) {
  BlockingCall blocking(blocking_);
  ireduce_scatter_coalesced(buffers, dtype, op, group, options).wait();
}

Work Communicator::iall_to_all(const void* in, void* out, std::size_t count, DType dtype,
                               const Group& group, const AllToAllOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "all_to_all");
  detail::check_options(options, "all_to_all");
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kAllToAll, group, options);
  request.buffers = {{in, out, count}};
  request.dtype = dtype;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::all_to_all(const void* in, void* out, std::size_t count, DType dtype,
                              const Group& group, const AllToAllOptions& options) {
  BlockingCall blocking(blocking_);
  iall_to_all(in, out, count, dtype, group, options).wait();
}

Work Communicator::iall_to_allv(const void* in, const BlockLayout& send, void* out,
                                const BlockLayout& receive, DType dtype, const Group& group,
                                const AllToAllvOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "all_to_allv");
  detail::check_options(options, "all_to_allv");
  detail::check_block_layouts(send, receive, group.size(), in, out);
  if (!options.member_axes.empty() &&
      options.member_axes.size() != static_cast<std::size_t>(group.size())) {
    throw InvalidArgument("all_to_allv: member_axes has " +
                          std::to_string(options.member_axes.size()) + " labels for a group of " +
                          std::to_string(group.size()));
  }
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kAllToAllv, group, options);
  request.buffers = {{in, out, 0}};
  request.send = send;
  request.receive = receive;
  request.dtype = dtype;
  request.member_axes = options.member_axes;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::all_to_allv(const void* in, const BlockLayout& send, void* out,
                               const BlockLayout& receive, DType dtype, const Group& group,
                               const AllToAllvOptions& options) {
  BlockingCall blocking(blocking_);
  iall_to_allv(in, send, out, receive, dtype, group, options).wait();
}

Work Communicator::ibroadcast(void* buffer, std::size_t count, DType dtype, Rank root,
                              const Group& group, const BroadcastOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "broadcast");
  detail::check_options(options, "broadcast");
  if (group.index_of(root) < 0) {
    throw InvalidArgument("broadcast root " + std::to_string(root) + " is not in group " +
                          group.to_string());
  }
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kBroadcast, group, options);
  request.buffers = {{buffer, buffer, count}};
  request.dtype = dtype;
  request.root = root;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::broadcast(void* buffer, std::size_t count, DType dtype, Rank root,
                             const Group& group, const BroadcastOptions& options) {
  BlockingCall blocking(blocking_);
  ibroadcast(buffer, count, dtype, root, group, options).wait();
}

Work Communicator::ibarrier(const Group& group, const BarrierOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "barrier");
  detail::check_options(options, "barrier");
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kBarrier, group, options);
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::barrier(const Group& group, const BarrierOptions& options) {
  BlockingCall blocking(blocking_);
  ibarrier(group, options).wait();
}

Work Communicator::ippermute(const void* in, void* out, std::size_t count, DType dtype,
                             const std::vector<PermutePair>& pairs, const Group& group,
                             const PpermuteOptions& options) {
  const int member = detail::member_index(group, rank(), size(), "ppermute");
  detail::check_options(options, "ppermute");
  detail::check_permutation(pairs, group.size(), in, out, count);
  OpRequest fresh;
  OpRequest& request = prepare(*scratch_, blocking_, fresh, CommOp::kPpermute, group, options);
  request.buffers = {{in, out, count}};
  request.dtype = dtype;
  request.pairs = pairs;
  return launch(*backend_, counters_, *scratch_, request, member, blocking_);
}

void Communicator::ppermute(const void* in, void* out, std::size_t count, DType dtype,
                            const std::vector<PermutePair>& pairs, const Group& group,
                            const PpermuteOptions& options) {
  BlockingCall blocking(blocking_);
  ippermute(in, out, count, dtype, pairs, group, options).wait();
}

Work Communicator::batch_isend_irecv(const std::vector<P2POp>& ops,
                                     const SendRecvOptions& options) {
  detail::check_options(options, "batch_isend_irecv");
  OpRequest fresh;
  OpRequest& request =
      prepare(*scratch_, blocking_, fresh, CommOp::kSend, Group{{rank()}, options.axes}, options);
  request.p2p_axes = options.axes;
  for (const P2POp& op : ops) {
    const bool sends = op.kind == P2POp::Kind::kSend;
    detail::check_peer(op.peer, rank(), size(), sends ? "send" : "recv");
    if (op.tag < 0 || op.tag > max_tag()) {
      throw InvalidArgument(std::string(sends ? "send" : "recv") + ": tag " +
                            std::to_string(op.tag) + " is outside 0 to " +
                            std::to_string(max_tag()) + ", the backend's bound");
    }
    request.messages.push_back(op);
    std::vector<std::byte> payload;
    if (sends && op.count > 0) {
      const auto* data = static_cast<const std::byte*>(op.buffer);
      payload.assign(data, data + op.count * size_in_bytes(op.dtype));
    }
    request.payloads.push_back(std::move(payload));
  }
  return launch(*backend_, counters_, *scratch_, request, 0, blocking_);
}

Work Communicator::isend(const void* data, std::size_t count, DType dtype, Rank destination,
                         const SendRecvOptions& options) {
  return batch_isend_irecv(
      {{P2POp::Kind::kSend, const_cast<void*>(data), count, dtype, destination, options.tag}},
      options);
}

Work Communicator::irecv(void* data, std::size_t count, DType dtype, Rank source,
                         const SendRecvOptions& options) {
  return batch_isend_irecv({{P2POp::Kind::kRecv, data, count, dtype, source, options.tag}},
                           options);
}

void Communicator::send(const void* data, std::size_t count, DType dtype, Rank destination,
                        const SendRecvOptions& options) {
  BlockingCall blocking(blocking_);
  isend(data, count, dtype, destination, options).wait();
}

void Communicator::recv(void* data, std::size_t count, DType dtype, Rank source,
                        const SendRecvOptions& options) {
  BlockingCall blocking(blocking_);
  irecv(data, count, dtype, source, options).wait();
}

std::unique_ptr<Communicator> Communicator::split(const Mesh& mesh,
                                                  const std::vector<std::string>& axes,
                                                  const CommOptions& options) {
  detail::check_options(options, "split");
  const Group group = group_along(mesh, axes, rank());
  (void)detail::member_index(group, rank(), size(), "split");
  auto child = backend_->split(group.ranks(), "split " + mesh_axes_text(mesh, axes), options);
  return std::make_unique<Communicator>(std::move(child));
}

std::unique_ptr<Communicator> Communicator::new_group(const std::vector<Rank>& ranks,
                                                      const CommOptions& options) {
  detail::check_options(options, "new_group");
  if (ranks.empty()) throw InvalidArgument("new_group: the group has no ranks");
  const Group group = [&] {
    try {
      return Group(ranks, "group");
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(std::string("new_group: ") + e.what());
    }
  }();
  (void)detail::member_index(group, ranks.front(), size(), "new_group");  // every rank exists
  std::string text = "new_group";
  for (Rank r : ranks) text += " " + std::to_string(r);
  const bool member = group.index_of(rank()) >= 0;
  auto child = backend_->split(member ? std::optional(ranks) : std::nullopt, text, options);
  return child ? std::make_unique<Communicator>(std::move(child)) : nullptr;
}

void Communicator::abort(const std::string& reason) { backend_->abort(reason); }

bool Communicator::with_peer_buffers(
    const void* mine, const Group& group,
    const std::function<void(const std::vector<const void*>&)>& work, const CommOptions& options) {
  (void)detail::member_index(group, rank(), size(), "with_peer_buffers");
  detail::check_options(options, "with_peer_buffers");
  return backend_->with_peer_buffers(mine, group, work, options);
}

bool Communicator::with_peer_buffers_as(
    CommOp op, std::size_t count, DType dtype, const void* mine, const Group& group,
    const std::function<void(const std::vector<const void*>&)>& work, const CommOptions& options) {
  if (op != CommOp::kAllGather && op != CommOp::kAllToAll) {
    throw InvalidArgument("with_peer_buffers_as counts all_gather or all_to_all, not " +
                          to_string(op));
  }
  const int member = detail::member_index(group, rank(), size(), "with_peer_buffers");
  if (!with_peer_buffers(mine, group, work, options)) return false;
  OpRequest request;
  reset(request, op, group, options);
  request.buffers = {{mine, nullptr, count}};
  request.dtype = dtype;
  detail::traffic_of(request, member, scratch_->traffic);
  for (const detail::TrafficRecord& r : scratch_->traffic) {
    counters_.record(r.op, r.axes, r.sent, r.received);
  }
  return true;
}

}  // namespace shardwise
