#include "mpi_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "../detail/checks.hpp"
#include "../detail/reduce.hpp"
#include "../detail/work_state.hpp"
#include "blocking_call_watch.hpp"
#include "mpi_signature.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPermuteTag = 1;
constexpr int kReduceScatterTag = 2;
// From this many bytes of input a reduce-scatter runs as an all-reduce (measured: faster).
constexpr std::size_t kReduceScatterByExchange = std::size_t{256} << 10;

std::vector<int> ints(const std::vector<std::size_t>& values) {
  std::vector<int> converted;
  converted.reserve(values.size());
  for (std::size_t v : values) converted.push_back(mpi_count(v));
  return converted;
}

// Polls `ready` the way MPI's own blocking calls wait when oversubscribed: busily for the first
// millisecond, then yielding the core, then after 100 ms with pauses of up to 200 us.
class Poller {
 public:
  void pause() {
    const auto elapsed = Clock::now() - start_;
    if (elapsed < std::chrono::milliseconds(1)) return;
    if (elapsed < std::chrono::milliseconds(100)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(200));
  }

 private:
  Clock::time_point start_ = Clock::now();
  std::chrono::microseconds sleep_{1};
};

}  // namespace

// One operation in flight: its members' signatures are exchanged first, then (when every
// earlier operation has posted its data) its data moves.
class MpiWorkState final : public WorkState {
 public:
  MpiWorkState(MpiBackend& backend, OpRequest request, int member)
      : backend_(backend),
        request_(std::move(request)),
        member_(member),
        deadline_(Clock::now() + request_.options.timeout) {}

  bool progress() override {
    backend_.progress();
    return done();
  }

  bool block(std::optional<Clock::time_point> until) override {
    Poller poller;
    while (true) {
      backend_.progress();
      if (done()) return true;
      if (until && Clock::now() > *until) return false;
      poller.pause();
    }
  }

  [[nodiscard]] bool data_posted() const { return stage_ >= Stage::kData; }
  [[nodiscard]] bool is_p2p() const { return request_.op == CommOp::kSend; }

  // Moves the operation on; `may_post` says every earlier operation has posted its data.
  // Returns true once it has finished (successfully or not).
  bool advance(bool may_post) {
    try {
      return step(may_post);
    } catch (const std::exception& e) {
      fail(e.what());
      return true;
    }
  }

  void fail(const std::string& message) {
    for (MPI_Request& r : requests_) {
      if (r != MPI_REQUEST_NULL && is_p2p()) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    }
    stage_ = Stage::kDone;
    finish(message);
  }

 private:
  enum class Stage { kStart, kSignature, kData, kDone };

  bool step(bool may_post) {
    if (stage_ == Stage::kStart) {
      if (is_p2p()) {
        if (!may_post) return false;
        post_p2p();
        stage_ = Stage::kData;
      } else {
        comms_ = backend_.comms_for(request_.group, request_.options, request_.name());
        post_signature();
        stage_ = Stage::kSignature;
      }
    }
    if (stage_ == Stage::kSignature) {
      int done = 0;
      backend_.check(MPI_Test(&signature_request_, &done, MPI_STATUS_IGNORE), request_.name());
      if (!done) {
        if (Clock::now() > deadline_) {
          const std::string message = request_.name() + " over " + request_.group.to_string() +
                                      " on rank " + std::to_string(backend_.rank_) +
                                      ": not every member arrived within " +
                                      std::to_string(request_.options.timeout.count()) + " ms";
          backend_.broken_ = "an earlier " + request_.name() + " over " +
                             request_.group.to_string() + " timed out";
          fail(message);
          return true;
        }
        return false;
      }
      if (auto wrong = mismatch(signatures_, request_.group, request_.name())) {
        fail(*wrong);
        return true;
      }
      if (!may_post) return false;
      // The data gets a timeout of its own: a member that arrived late has not used it up.
      data_deadline_ = Clock::now() + request_.options.timeout;
      post_data();
      stage_ = Stage::kData;
    }
    if (stage_ == Stage::kData) {
      int done = 0;
      backend_.check(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                                 MPI_STATUSES_IGNORE),
                     request_.name());
      if (!done) {
        if (is_p2p() && Clock::now() > deadline_) {
          fail("recv on rank " + std::to_string(backend_.rank_) + " from rank " +
               std::to_string(first_receive_peer()) + ": no message within " +
               std::to_string(request_.options.timeout.count()) + " ms");
          return true;
        }
        if (!is_p2p() && Clock::now() > data_deadline_) {
          // Every member arrived, but one stopped before its part of the data (a SIGSTOPped
          // process, a host gone): a collective MPI cannot cancel. It fails, the communicator
          // refuses what follows, and the buffers MPI may still write stay alive until the
          // process ends (the run ends on this failure).
          backend_.broken_ = "an earlier " + request_.name() + " over " +
                             request_.group.to_string() + " did not finish";
          for (std::vector<std::byte>& buffer : staging_) {
            backend_.abandoned_buffers_.push_back(std::move(buffer));
          }
          staging_.clear();
          requests_.clear();
          fail(request_.name() + " over " + request_.group.to_string() + " on rank " +
               std::to_string(backend_.rank_) +
               ": every member arrived, but the data did not finish within " +
               std::to_string(request_.options.timeout.count()) +
               " ms (a member stopped during it?)");
          return true;
        }
        return false;
      }
      after();
      stage_ = Stage::kDone;
      finish(std::nullopt);
      return true;
    }
    return true;
  }

  // "all_reduce over [0, 1] on rank 0", for the watchdog's line.
  [[nodiscard]] std::string watched_name() const {
    return "rank " + std::to_string(backend_.rank_) + ": " + request_.name() + " over " +
           request_.group.to_string();
  }

  [[nodiscard]] Rank first_receive_peer() const {
    for (const P2POp& m : request_.messages) {
      if (m.kind == P2POp::Kind::kRecv) return m.peer;
    }
    return -1;
  }

  void post_signature() {
    const MpiSignature mine = signature_of(request_, member_);
    signatures_.resize(request_.group.ranks().size());
    backend_.check(
        MPI_Iallgather(&mine, sizeof(MpiSignature), MPI_BYTE, signatures_.data(),
                       sizeof(MpiSignature), MPI_BYTE, comms_.signatures, &signature_request_),
        request_.name());
  }

  [[nodiscard]] bool all_in_place() const {
    return std::all_of(signatures_.begin(), signatures_.end(),
                       [](const MpiSignature& s) { return s.in_place != 0; });
  }

  // MPI wants MPI_IN_PLACE from every member or none: a member whose input is its output,
  // among members that are not, sends from a copy.
  const void* send_buffer(const void* in, std::size_t bytes) {
    staging_.emplace_back(static_cast<const std::byte*>(in),
                          static_cast<const std::byte*>(in) + bytes);
    return staging_.back().data();
  }

  void add(int code) { backend_.check(code, request_.name()); }

  MPI_Request& next_request() {
    requests_.push_back(MPI_REQUEST_NULL);
    return requests_.back();
  }

  void post_data() {
    const MpiTypes& types = backend_.process_->types();
    const MPI_Datatype type = types.type(request_.dtype);
    const MPI_Comm comm = comms_.data;
    const std::size_t element = size_in_bytes(request_.dtype);
    const bool in_place = all_in_place();
    // Where every member waits on the call at once, it runs as MPI's blocking collective,
    // which OpenMPI runs up to 2x faster than the nonblocking one (all-reduce, broadcast).
    // Every member sees every signature, so all choose alike.
    const bool blocking = std::all_of(signatures_.begin(), signatures_.end(),
                                      [](const MpiSignature& s) { return s.blocking != 0; });
    switch (request_.op) {
      case CommOp::kAllReduce:
        for (const CoalescedBuffer& b : request_.buffers) {
          const void* in = in_place ? MPI_IN_PLACE
                                    : (b.in == b.out ? send_buffer(b.in, b.count * element) : b.in);
          const MPI_Op op = types.reduction(request_.dtype, request_.reduce);
          if (blocking) {
            const BlockingCallWatch watch(watched_name(), request_.options.timeout,
                                          Clock::now() + request_.options.timeout);
            add(MPI_Allreduce(in, b.out, mpi_count(b.count), type, op, comm));
          } else {
            add(MPI_Iallreduce(in, b.out, mpi_count(b.count), type, op, comm, &next_request()));
          }
        }
        return;
      case CommOp::kReduceScatter: {
        const MPI_Op op = types.reduction(request_.dtype, request_.reduce);
        const auto n = static_cast<std::size_t>(request_.group.size());
        for (const CoalescedBuffer& b : request_.buffers) {
          // OpenMPI 4.1's reduce-scatter on shared memory runs at about a fifth of its
          // all-reduce of the same buffer (docs/benchmarks.md): from 256 KiB up, every member
          // sends each peer the block it owns and receives its own block from every peer in
          // one round of point-to-point messages ((n-1)/n of the buffer, the least any
          // algorithm moves), then reduces them itself once all have arrived.
          const std::size_t total = b.count * n;
          if (total * element >= kReduceScatterByExchange) {
            const std::size_t block = b.count * element;
            staging_.push_back(backend_.take_buffer((n - 1) * block));
            std::byte* received = staging_.back().data();
            ExchangeReduction reduction{{}, b.out, b.count};
            const auto* in = static_cast<const std::byte*>(b.in);
            for (std::size_t j = 0, slot = 0; j < n; ++j) {
              if (j == static_cast<std::size_t>(member_)) {
                reduction.inputs.push_back(in + j * block);
                continue;
              }
              std::byte* into = received + slot++ * block;
              const int peer = static_cast<int>(j);
              add(MPI_Irecv(into, mpi_count(b.count), type, peer, kReduceScatterTag, comm,
                            &next_request()));
              add(MPI_Isend(in + j * block, mpi_count(b.count), type, peer, kReduceScatterTag, comm,
                            &next_request()));
              reduction.inputs.push_back(into);
            }
            reductions_.push_back(std::move(reduction));
            continue;
          }
          add(MPI_Ireduce_scatter_block(b.in, b.out, mpi_count(b.count), type, op, comm,
                                        &next_request()));
        }
        return;
      }
      case CommOp::kAllGather: {
        const CoalescedBuffer& b = request_.buffers.front();
        const bool mine_in_place = signatures_[static_cast<std::size_t>(member_)].in_place != 0;
        const void* in =
            in_place ? MPI_IN_PLACE : (mine_in_place ? send_buffer(b.in, b.count * element) : b.in);
        add(MPI_Iallgather(in, mpi_count(b.count), type, b.out, mpi_count(b.count), type, comm,
                           &next_request()));
        return;
      }
      case CommOp::kAllToAll: {
        const CoalescedBuffer& b = request_.buffers.front();
        add(MPI_Ialltoall(in_place ? MPI_IN_PLACE : b.in, mpi_count(b.count), type, b.out,
                          mpi_count(b.count), type, comm, &next_request()));
        return;
      }
      case CommOp::kAllToAllv: {
        const CoalescedBuffer& b = request_.buffers.front();
        layouts_ = {ints(request_.send.counts), ints(request_.send.offsets),
                    ints(request_.receive.counts), ints(request_.receive.offsets)};
        add(MPI_Ialltoallv(b.in, layouts_[0].data(), layouts_[1].data(), type, b.out,
                           layouts_[2].data(), layouts_[3].data(), type, comm, &next_request()));
        return;
      }
      case CommOp::kBroadcast: {
        const CoalescedBuffer& b = request_.buffers.front();
        const int root = request_.group.index_of(request_.root);
        if (blocking) {
          const BlockingCallWatch watch(watched_name(), request_.options.timeout,
                                        Clock::now() + request_.options.timeout);
          add(MPI_Bcast(b.out, mpi_count(b.count), type, root, comm));
        } else {
          add(MPI_Ibcast(b.out, mpi_count(b.count), type, root, comm, &next_request()));
        }
        return;
      }
      case CommOp::kPpermute: {
        const CoalescedBuffer& b = request_.buffers.front();
        const PermuteRole role = permute_role(request_.pairs, member_);
        if (role.receives) {
          add(MPI_Irecv(b.out, mpi_count(b.count), type, role.incoming->source, kPermuteTag, comm,
                        &next_request()));
        }
        if (role.sends) {
          add(MPI_Isend(b.in, mpi_count(b.count), type, role.outgoing->destination, kPermuteTag,
                        comm, &next_request()));
        }
        return;
      }
      case CommOp::kBarrier:  // the signatures' exchange was the barrier
      case CommOp::kSend:
      case CommOp::kRecv: return;
    }
  }

  // Receives into the caller's buffers; sends go from the copies the request holds, in the
  // background: a send never waits for its receiver, so a ring of sends cannot deadlock.
  void post_p2p() {
    for (std::size_t i = 0; i < request_.messages.size(); ++i) {
      const P2POp& m = request_.messages[i];
      const MPI_Datatype type = backend_.process_->types().type(m.dtype);
      if (m.kind == P2POp::Kind::kRecv) {
        add(MPI_Irecv(m.buffer, mpi_count(m.count), type, m.peer, m.tag, backend_.p2p_,
                      &next_request()));
        continue;
      }
      auto payload = std::make_shared<std::vector<std::byte>>(std::move(request_.payloads[i]));
      MPI_Request send = MPI_REQUEST_NULL;
      add(MPI_Isend(payload->data(), mpi_count(m.count), type, m.peer, m.tag, backend_.p2p_,
                    &send));
      backend_.background_sends_.push_back({std::move(payload), send});
    }
  }

  void after() {
    // Averages are divided below, once.
    const ReduceOp reduce = request_.reduce == ReduceOp::kAvg ? ReduceOp::kSum : request_.reduce;
    for (const ExchangeReduction& r : reductions_) {
      reduce_into(r.inputs, r.out, r.count, request_.dtype, reduce);
    }
    for (std::vector<std::byte>& buffer : staging_) backend_.give_buffer(std::move(buffer));
    staging_.clear();
    const CoalescedBuffer* first = request_.buffers.empty() ? nullptr : &request_.buffers.front();
    switch (request_.op) {
      case CommOp::kAllReduce:
      case CommOp::kReduceScatter:
        if (request_.reduce == ReduceOp::kAvg) {
          for (const CoalescedBuffer& b : request_.buffers) {
            divide(b.out, b.count, request_.dtype, request_.group.size());
          }
        }
        return;
      case CommOp::kPpermute: {
        const PermuteRole role = permute_role(request_.pairs, member_);
        const std::size_t bytes = first->count * size_in_bytes(request_.dtype);
        if (role.incoming == nullptr && bytes > 0) std::memset(first->out, 0, bytes);
        if (role.incoming != nullptr && !role.receives && bytes > 0) {
          std::memcpy(first->out, first->in, bytes);
        }
        return;
      }
      default: return;
    }
  }

  MpiBackend& backend_;
  OpRequest request_;
  int member_;
  Clock::time_point deadline_;
  Clock::time_point data_deadline_ = Clock::time_point::max();
  Stage stage_ = Stage::kStart;
  MpiBackend::GroupComms comms_;
  std::vector<MpiSignature> signatures_;
  MPI_Request signature_request_ = MPI_REQUEST_NULL;
  std::vector<MPI_Request> requests_;
  std::vector<std::vector<std::byte>> staging_;
  std::vector<std::vector<int>> layouts_;
  // Reduce-scatters by exchange: every member's copy of this member's block (its own in
  // place), reduced into `out` once all have arrived.
  struct ExchangeReduction {
    std::vector<const void*> inputs;
    void* out;
    std::size_t count;
  };
  std::vector<ExchangeReduction> reductions_;
};

MpiBackend::MpiBackend(std::shared_ptr<MpiProcess> process, MPI_Comm comm)
    : process_(std::move(process)), comm_(comm) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_dup(comm_, &meeting_);
  MPI_Comm_dup(comm_, &p2p_);
  MPI_Comm_set_errhandler(p2p_, MPI_ERRORS_RETURN);
  // The world ranks of the members, in this communicator's order.
  MPI_Group mine = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  MPI_Comm_group(comm_, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> local(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) local[static_cast<std::size_t>(r)] = r;
  world_ranks_.resize(static_cast<std::size_t>(size_));
  MPI_Group_translate_ranks(mine, size_, local.data(), world, world_ranks_.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
}

MpiBackend::~MpiBackend() {
  drain();
  for (auto& [payload, request] : background_sends_) MPI_Wait(&request, MPI_STATUS_IGNORE);
  for (auto& [ranks, comms] : comms_) {
    MPI_Comm_free(&comms.signatures);
    MPI_Comm_free(&comms.data);
  }
  MPI_Comm_free(&p2p_);
  MPI_Comm_free(&meeting_);
  MPI_Comm_free(&comm_);
}

void MpiBackend::drain() {
  Poller poller;
  while (!pending_.empty()) {
    progress();
    poller.pause();
  }
}

std::vector<std::byte> MpiBackend::take_buffer(std::size_t bytes) {
  for (auto it = spare_buffers_.begin(); it != spare_buffers_.end(); ++it) {
    if (it->size() >= bytes) {
      std::vector<std::byte> buffer = std::move(*it);
      spare_buffers_.erase(it);
      buffer.resize(bytes);
      return buffer;
    }
  }
  return std::vector<std::byte>(bytes);
}

void MpiBackend::give_buffer(std::vector<std::byte> buffer) {
  buffer.resize(buffer.capacity());
  spare_buffers_.push_back(std::move(buffer));
  // Keep a few, the largest.
  std::sort(spare_buffers_.begin(), spare_buffers_.end(),
            [](const auto& a, const auto& b) { return a.size() > b.size(); });
  if (spare_buffers_.size() > 4) spare_buffers_.resize(4);
}

void MpiBackend::check(int code, const std::string& what) const {
  if (code != MPI_SUCCESS) {
    throw CommError(what + " on rank " + std::to_string(rank_) +
                    " failed in MPI: " + mpi_error_text(code));
  }
}

Work MpiBackend::start(OpRequest request) {
  if (const auto& aborted = process_->aborted()) {
    throw CommError(request.name() + " aborted: " + *aborted);
  }
  if (broken_) {
    throw CommError(request.name() + " cannot run: " + *broken_ +
                    ", so this communicator's members no longer agree on what runs next");
  }
  const int member = request.op == CommOp::kSend ? 0 : request.group.index_of(rank_);
  auto state = std::make_shared<MpiWorkState>(*this, std::move(request), member);
  pending_.push_back(state);
  progress();
  return Work(state);
}

void MpiBackend::progress() {
  if (const auto& aborted = process_->aborted()) {
    for (const auto& work : pending_) work->fail("aborted: " + *aborted);
    pending_.clear();
    return;
  }
  bool earlier_posted = true;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const bool finished = (*it)->advance(earlier_posted);
    earlier_posted = earlier_posted && ((*it)->data_posted() || finished);
    it = finished ? pending_.erase(it) : it + 1;
  }
  // Background sends that have left are dropped.
  std::erase_if(background_sends_, [](auto& send) {
    int done = 0;
    MPI_Test(&send.second, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

MpiBackend::GroupComms& MpiBackend::comms_for(const Group& group, const CommOptions& options,
                                              const std::string& op) {
  auto it = comms_.find(group.ranks());
  if (it != comms_.end()) return it->second;
  meet(group, options, op);
  MPI_Group all = MPI_GROUP_NULL;
  MPI_Group members = MPI_GROUP_NULL;
  MPI_Comm_group(comm_, &all);
  check(MPI_Group_incl(all, group.size(), group.ranks().data(), &members), op);
  GroupComms comms;
  check(MPI_Comm_create_group(comm_, members, 0, &comms.data), op);
  MPI_Comm_set_errhandler(comms.data, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(comms.data, &comms.signatures), op);
  MPI_Group_free(&members);
  MPI_Group_free(&all);
  return comms_[group.ranks()] = comms;
}

void MpiBackend::meet(const Group& group, const CommOptions& options, const std::string& op) {
  std::uint64_t key = 1469598103934665603ULL;
  for (Rank r : group.ranks()) key = (key ^ static_cast<std::uint64_t>(r)) * 1099511628211ULL;
  const int tag = 1 + static_cast<int>(key % 30000);
  std::vector<MPI_Request> requests;
  std::vector<std::uint64_t> received(group.ranks().size());
  for (std::size_t i = 0; i < group.ranks().size(); ++i) {
    const Rank peer = group.ranks()[i];
    if (peer == rank_) continue;
    requests.emplace_back();
    check(MPI_Isend(&key, 1, MPI_UINT64_T, peer, tag, meeting_, &requests.back()), op);
    requests.emplace_back();
    check(MPI_Irecv(&received[i], 1, MPI_UINT64_T, peer, tag, meeting_, &requests.back()), op);
  }
  const auto deadline = Clock::now() + options.timeout;
  int done = 0;
  Poller poller;
  while (true) {
    check(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        op);
    if (done) break;
    if (const auto& aborted = process_->aborted()) throw CommError(op + " aborted: " + *aborted);
    if (Clock::now() > deadline) {
      throw CommError(op + " over " + group.to_string() + " on rank " + std::to_string(rank_) +
                      ": not every member arrived within " +
                      std::to_string(options.timeout.count()) + " ms");
    }
    poller.pause();
  }
  for (std::size_t i = 0; i < group.ranks().size(); ++i) {
    if (group.ranks()[i] != rank_ && received[i] != key) {
      throw CommError(op + " over " + group.to_string() + ": rank " +
                      std::to_string(group.ranks()[i]) + " joined a different group");
    }
  }
}

std::unique_ptr<CommBackend> MpiBackend::split(const std::optional<std::vector<Rank>>& members,
                                               const std::string& agreement,
                                               const CommOptions& options) {
  drain();
  const Group everyone = world_group(size_);
  GroupComms& comms = comms_for(everyone, options, "split");
  const MpiSignature mine = split_signature(agreement);
  std::vector<MpiSignature> all(static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(&mine, sizeof(MpiSignature), MPI_BYTE, all.data(), sizeof(MpiSignature),
                       MPI_BYTE, comms.signatures, &request),
        "split");
  const auto deadline = Clock::now() + options.timeout;
  Poller poller;
  int done = 0;
  while (true) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "split");
    if (done) break;
    if (Clock::now() > deadline) {
      broken_ = "an earlier split timed out";
      throw CommError("split over " + everyone.to_string() + " on rank " + std::to_string(rank_) +
                      ": not every member arrived within " +
                      std::to_string(options.timeout.count()) + " ms");
    }
    poller.pause();
  }
  if (auto wrong = mismatch(all, everyone, "split")) {
    throw CommError(*wrong + " (they split differently)");
  }
  const int color = members ? members->front() : MPI_UNDEFINED;
  int key = 0;
  if (members) {
    key = static_cast<int>(std::find(members->begin(), members->end(), rank_) - members->begin());
  }
  MPI_Comm child = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &child), "split");
  if (child == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiBackend>(process_, child);
}

void MpiBackend::abort(const std::string& reason) {
  process_->abort(reason);
  progress();
}

int MpiBackend::max_tag() const {
  int* bound = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &bound, &found) != MPI_SUCCESS || found == 0 ||
      bound == nullptr) {
    return 32767;  // what the standard guarantees
  }
  return *bound;
}

}  // namespace shardwise::detail
