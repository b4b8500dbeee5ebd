// The MPI backend. Every collective is polled against its timeout (as MPI's nonblocking call,
// or after a nonblocking barrier), so a member that never arrives turns into a CommError
// instead of a hang; the data moves through MPI's own collectives.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <type_traits>

#include "../detail/checks.hpp"
#include "../detail/reduce.hpp"
#include "shardwise/comm/mpi.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/half.hpp"

namespace shardwise {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

// The 16-bit float types travel as two bytes; their reductions run in f32.
struct HalfOps {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::map<std::pair<DType, ReduceOp>, MPI_Op> ops;
};

template <DType D, ReduceOp O>
void reduce_half(void* in, void* inout, int* length, MPI_Datatype*) {
  detail::reduce_into({inout, in}, inout, static_cast<std::size_t>(*length), D,
                      O == ReduceOp::kAvg ? ReduceOp::kSum : O);
}

template <DType D>
void register_half_ops(HalfOps& ops) {
  MPI_Op_create(&reduce_half<D, ReduceOp::kSum>, 1, &ops.ops[{D, ReduceOp::kSum}]);
  ops.ops[{D, ReduceOp::kAvg}] = ops.ops[{D, ReduceOp::kSum}];
  MPI_Op_create(&reduce_half<D, ReduceOp::kMax>, 1, &ops.ops[{D, ReduceOp::kMax}]);
  MPI_Op_create(&reduce_half<D, ReduceOp::kMin>, 1, &ops.ops[{D, ReduceOp::kMin}]);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_dup(MPI_COMM_WORLD, &meeting_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Type_contiguous(2, MPI_BYTE, &half_.type);
    MPI_Type_commit(&half_.type);
    register_half_ops<DType::kBF16>(half_);
    register_half_ops<DType::kF16>(half_);
  }

  ~MpiCommunicator() override {
    complete_sends(true);
    for (auto& [ranks, comm] : comms_) MPI_Comm_free(&comm);
    MPI_Comm_free(&meeting_);
    // avg shares sum's operation: free each handle once.
    std::set<MPI_Op> distinct;
    for (const auto& [key, op] : half_.ops) distinct.insert(op);
    for (MPI_Op op : distinct) MPI_Op_free(&op);
    MPI_Type_free(&half_.type);
  }

  [[nodiscard]] Rank rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] std::string backend() const override { return "mpi"; }

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                  const Group& group, const AllReduceOptions& options) override {
    MPI_Comm comm = communicator(group, "all_reduce", options);
    arrive(comm, "all_reduce", group, options);
    check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, mpi_count(count), type(dtype),
                        reduction(dtype, op), comm),
          "all_reduce");
    if (op == ReduceOp::kAvg) divide(out, count, dtype, group.size());
    const auto n = static_cast<std::size_t>(group.size());
    const auto moved = static_cast<std::int64_t>(2 * (n - 1) * count * size_in_bytes(dtype) / n);
    if (n > 1) counters().record("all_reduce", group.axes, moved, moved);
  }

  void all_gather(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllGatherOptions& options) override {
    MPI_Comm comm = communicator(group, "all_gather", options);
    const std::size_t bytes = count * size_in_bytes(dtype);
    const bool in_place = in == static_cast<const std::byte*>(out) +
                                    static_cast<std::size_t>(group.index_of(rank_)) * bytes;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, mpi_count(count), type(dtype), out,
                         mpi_count(count), type(dtype), comm, &request),
          "all_gather");
    wait(request, "all_gather", group, options);
    detail::record_exchange(counters(), "all_gather", group, bytes);
  }

  void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, ReduceOp op,
                      const Group& group, const ReduceScatterOptions& options) override {
    MPI_Comm comm = communicator(group, "reduce_scatter", options);
    arrive(comm, "reduce_scatter", group, options);
    check(MPI_Reduce_scatter_block(in, out, mpi_count(count), type(dtype), reduction(dtype, op),
                                   comm),
          "reduce_scatter");
    if (op == ReduceOp::kAvg) divide(out, count, dtype, group.size());
    detail::record_exchange(counters(), "reduce_scatter", group, count * size_in_bytes(dtype));
  }

  void all_to_all(const void* in, void* out, std::size_t count, DType dtype, const Group& group,
                  const AllToAllOptions& options) override {
    MPI_Comm comm = communicator(group, "all_to_all", options);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ialltoall(in == out ? MPI_IN_PLACE : in, mpi_count(count), type(dtype), out,
                        mpi_count(count), type(dtype), comm, &request),
          "all_to_all");
    wait(request, "all_to_all", group, options);
    detail::record_exchange(counters(), "all_to_all", group, count * size_in_bytes(dtype));
  }

  void all_to_allv(const void* in, const BlockLayout& send, void* out, const BlockLayout& receive,
                   DType dtype, const Group& group, const AllToAllvOptions& options) override {
    MPI_Comm comm = communicator(group, "all_to_allv", options);
    const int member = group.index_of(rank_);
    detail::check_block_layouts(send, receive, group.size(), in, out);
    auto ints = [](const std::vector<std::size_t>& values) {
      std::vector<int> converted;
      converted.reserve(values.size());
      for (std::size_t v : values) converted.push_back(mpi_count(v));
      return converted;
    };
    const std::vector<int> send_counts = ints(send.counts);
    const std::vector<int> send_offsets = ints(send.offsets);
    const std::vector<int> receive_counts = ints(receive.counts);
    const std::vector<int> receive_offsets = ints(receive.offsets);
    MPI_Request request = MPI_REQUEST_NULL;
    check(
        MPI_Ialltoallv(in, send_counts.data(), send_offsets.data(), type(dtype), out,
                       receive_counts.data(), receive_offsets.data(), type(dtype), comm, &request),
        "all_to_allv");
    wait(request, "all_to_allv", group, options);
    if (options.count_bytes) {
      detail::record_all_to_allv(counters(), group, member, send, receive, size_in_bytes(dtype));
    }
  }

  void broadcast(void* buffer, std::size_t count, DType dtype, Rank root, const Group& group,
                 const BroadcastOptions& options) override {
    MPI_Comm comm = communicator(group, "broadcast", options);
    const int root_member = group.index_of(root);
    if (root_member < 0) {
      throw InvalidArgument("broadcast root " + std::to_string(root) + " is not in group " +
                            group.to_string());
    }
    arrive(comm, "broadcast", group, options);
    check(MPI_Bcast(buffer, mpi_count(count), type(dtype), root_member, comm), "broadcast");
    const auto n = static_cast<std::int64_t>(group.size());
    const auto bytes = static_cast<std::int64_t>(count * size_in_bytes(dtype));
    if (n > 1) {
      const bool is_root = rank_ == root;
      counters().record("broadcast", group.axes, is_root ? (n - 1) * bytes : 0,
                        is_root ? 0 : bytes);
    }
  }

  void barrier(const Group& group, const BarrierOptions& options) override {
    MPI_Comm comm = communicator(group, "barrier", options);
    arrive(comm, "barrier", group, options);
  }

  // Straight from `in` and into `out` (no staging), over the group's own communicator so that
  // the messages cannot meet user sends; every request is polled against the timeout.
  void ppermute(const void* in, void* out, std::size_t count, DType dtype,
                const std::vector<PermutePair>& pairs, const Group& group,
                const PpermuteOptions& options) override {
    MPI_Comm comm = communicator(group, "ppermute", options);
    const int member = group.index_of(rank_);
    detail::check_permutation(pairs, group.size(), in, out, count);
    const std::size_t bytes = count * size_in_bytes(dtype);
    const detail::PermuteRole role = detail::permute_role(pairs, member);
    MPI_Request send_request = MPI_REQUEST_NULL;
    MPI_Request recv_request = MPI_REQUEST_NULL;
    if (role.receives) {
      check(MPI_Irecv(out, mpi_count(count), type(dtype), role.incoming->source, kPermuteTag, comm,
                      &recv_request),
            "ppermute");
    }
    if (role.sends) {
      check(MPI_Isend(in, mpi_count(count), type(dtype), role.outgoing->destination, kPermuteTag,
                      comm, &send_request),
            "ppermute");
    }
    if (role.incoming == nullptr && bytes > 0) std::memset(out, 0, bytes);
    if (role.incoming != nullptr && !role.receives && bytes > 0) std::memcpy(out, in, bytes);
    if (role.receives) wait(recv_request, "ppermute", group, options);
    if (role.sends) wait(send_request, "ppermute", group, options);
    detail::record_permute(counters(), group, role, bytes);
  }

  // Buffered, as on the local backend: the message is copied and sent in the background, so
  // a send never waits for its receiver (a ring of sends cannot deadlock).
  void send(const void* data, std::size_t count, DType dtype, Rank destination,
            const SendRecvOptions& options) override {
    detail::check_peer(destination, rank_, size_, "send");
    complete_sends(false);
    const std::size_t bytes = count * size_in_bytes(dtype);
    auto pending = std::make_unique<PendingSend>();
    pending->buffer.assign(static_cast<const std::byte*>(data),
                           static_cast<const std::byte*>(data) + bytes);
    check(MPI_Isend(pending->buffer.data(), mpi_count(count), type(dtype), destination, options.tag,
                    MPI_COMM_WORLD, &pending->request),
          "send to rank " + std::to_string(destination));
    pending_sends_.push_back(std::move(pending));
    counters().record("send", options.axes, static_cast<std::int64_t>(bytes), 0);
  }

  void recv(void* data, std::size_t count, DType dtype, Rank source,
            const SendRecvOptions& options) override {
    detail::check_peer(source, rank_, size_, "recv");
    detail::check_options(options, "recv");
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Irecv(data, mpi_count(count), type(dtype), source, options.tag, MPI_COMM_WORLD,
                    &request),
          "recv");
    wait(request, "recv from rank " + std::to_string(source), Group{{source, rank_}, "p2p"},
         options);
    counters().record("recv", options.axes, 0,
                      static_cast<std::int64_t>(count * size_in_bytes(dtype)));
  }

 private:
  static int mpi_count(std::size_t count) {
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      throw InvalidArgument("count " + std::to_string(count) + " exceeds MPI's int counts");
    }
    return static_cast<int>(count);
  }

  MPI_Datatype type(DType dtype) const {
    switch (dtype) {
      case DType::kF32: return MPI_FLOAT;
      case DType::kF64: return MPI_DOUBLE;
      case DType::kI32: return MPI_INT32_T;
      case DType::kI64: return MPI_INT64_T;
      case DType::kBF16:
      case DType::kF16: return half_.type;
    }
    return MPI_BYTE;
  }

  MPI_Op reduction(DType dtype, ReduceOp op) const {
    if (dtype == DType::kBF16 || dtype == DType::kF16) return half_.ops.at({dtype, op});
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return MPI_SUM;
      case ReduceOp::kMax: return MPI_MAX;
      case ReduceOp::kMin: return MPI_MIN;
    }
    return MPI_SUM;
  }

  // avg = sum / n: integers truncate; 16-bit floats divide in f32 and round back.
  static void divide(void* data, std::size_t count, DType dtype, int n) {
    auto scale = [&](auto* values) {
      using T = std::remove_pointer_t<decltype(values)>;
      for (std::size_t e = 0; e < count; ++e) values[e] = static_cast<T>(values[e] / n);
    };
    auto scale_half = [&](auto* values, auto convert) {
      for (std::size_t e = 0; e < count; ++e) {
        values[e] = convert(to_float(values[e]) / static_cast<float>(n));
      }
    };
    switch (dtype) {
      case DType::kF32: scale(static_cast<float*>(data)); break;
      case DType::kF64: scale(static_cast<double*>(data)); break;
      case DType::kI32: scale(static_cast<std::int32_t*>(data)); break;
      case DType::kI64: scale(static_cast<std::int64_t*>(data)); break;
      case DType::kBF16: scale_half(static_cast<BFloat16*>(data), to_bfloat16); break;
      case DType::kF16: scale_half(static_cast<Float16*>(data), to_float16); break;
    }
  }

  void check(int code, const std::string& op) const {
    if (code != MPI_SUCCESS) {
      throw CommError(op + " on rank " + std::to_string(rank_) +
                      " failed in MPI: " + mpi_error_text(code));
    }
  }

  // Two ways to make a collective time out. All-gather and all-to-all run as MPI's nonblocking
  // call, polled against the deadline: measured here, OpenMPI's nonblocking versions of these
  // two are as fast as the blocking ones. The others (whose nonblocking versions are slower:
  // all-reduce by up to 2x) first meet in a nonblocking barrier that can time out, then run
  // MPI's own blocking call, at the price of one barrier's latency.
  void arrive(MPI_Comm comm, const std::string& op, const Group& group,
              const CommOptions& options) const {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm, &request), op);
    wait(request, op, group, options);
  }

  // Polls the request until it completes or the timeout passes (MPI progresses inside
  // MPI_Test): busily for the first millisecond, then yielding the core between polls, as
  // MPI's own blocking calls do when oversubscribed; after 100 ms, with growing pauses.
  void wait(MPI_Request& request, const std::string& op, const Group& group,
            const CommOptions& options) const {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + options.timeout;
    int done = 0;
    auto pause = std::chrono::microseconds(1);
    while (true) {
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
      if (done) return;
      const auto now = std::chrono::steady_clock::now();
      if (now - start < std::chrono::milliseconds(1)) continue;
      if (now - start < std::chrono::milliseconds(100)) {
        std::this_thread::yield();
        continue;
      }
      if (now > deadline) {
        throw CommError(op + " over " + group.to_string() + " on rank " + std::to_string(rank_) +
                        ": not every member arrived within " +
                        std::to_string(options.timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }

  // The communicator of a group's members, created the first time the group is used. Creating
  // one is collective over the members and cannot time out in MPI, so the members first meet
  // with point-to-point tokens that can: a member that never comes fails the others.
  MPI_Comm communicator(const Group& group, const char* op, const CommOptions& options) {
    detail::check_options(options, op);
    // A group found here was checked when its communicator was made.
    auto it = comms_.find(group.ranks);
    if (it != comms_.end()) return it->second;
    (void)detail::member_index(group, rank_, size_, op);
    meet(group, op, options);
    MPI_Group world_group_handle = MPI_GROUP_NULL;
    MPI_Group members = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group_handle);
    check(MPI_Group_incl(world_group_handle, group.size(), group.ranks.data(), &members), op);
    MPI_Comm comm = MPI_COMM_NULL;
    check(MPI_Comm_create_group(MPI_COMM_WORLD, members, 0, &comm), op);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Group_free(&members);
    MPI_Group_free(&world_group_handle);
    comms_[group.ranks] = comm;
    return comm;
  }

  // Every member sends every other a token naming the group and waits for theirs, with the
  // operation's timeout.
  void meet(const Group& group, const char* op, const CommOptions& options) {
    std::uint64_t key = 1469598103934665603ULL;
    for (Rank r : group.ranks) key = (key ^ static_cast<std::uint64_t>(r)) * 1099511628211ULL;
    const int tag = 1 + static_cast<int>(key % 30000);
    std::vector<MPI_Request> requests;
    std::vector<std::uint64_t> received(group.ranks.size());
    for (std::size_t i = 0; i < group.ranks.size(); ++i) {
      const Rank peer = group.ranks[i];
      if (peer == rank_) continue;
      requests.emplace_back();
      check(MPI_Isend(&key, 1, MPI_UINT64_T, peer, tag, meeting_, &requests.back()), op);
      requests.emplace_back();
      check(MPI_Irecv(&received[i], 1, MPI_UINT64_T, peer, tag, meeting_, &requests.back()), op);
    }
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    int done = 0;
    while (true) {
      check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                        MPI_STATUSES_IGNORE),
            op);
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline) {
        throw CommError(std::string(op) + " over " + group.to_string() + " on rank " +
                        std::to_string(rank_) + ": not every member arrived within " +
                        std::to_string(options.timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (std::size_t i = 0; i < group.ranks.size(); ++i) {
      if (group.ranks[i] != rank_ && received[i] != key) {
        throw CommError(std::string(op) + " over " + group.to_string() + ": rank " +
                        std::to_string(group.ranks[i]) + " joined a different group");
      }
    }
  }

  struct PendingSend {
    std::vector<std::byte> buffer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  // Drops the buffered sends that have completed; with `all`, waits for every one.
  void complete_sends(bool all) {
    std::vector<std::unique_ptr<PendingSend>> still_pending;
    for (auto& pending : pending_sends_) {
      int done = 0;
      if (all) {
        MPI_Wait(&pending->request, MPI_STATUS_IGNORE);
        done = 1;
      } else {
        MPI_Test(&pending->request, &done, MPI_STATUS_IGNORE);
      }
      if (!done) still_pending.push_back(std::move(pending));
    }
    pending_sends_ = std::move(still_pending);
  }

  static constexpr int kPermuteTag = 1;

  int rank_ = 0;
  int size_ = 1;
  HalfOps half_;
  std::map<std::vector<Rank>, MPI_Comm> comms_;
  // Carries the tokens of group meetings, apart from user messages.
  MPI_Comm meeting_ = MPI_COMM_NULL;
  std::vector<std::unique_ptr<PendingSend>> pending_sends_;
};

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  world_ = std::make_unique<MpiCommunicator>();
}

MpiSession::~MpiSession() {
  world_.reset();
  MPI_Finalize();
}

Communicator& MpiSession::world() { return *world_; }

void MpiSession::abort(int status) {
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

double raw_mpi_seconds(const std::string& op, std::size_t bytes, int iterations) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::size_t count = bytes / sizeof(float);
  const std::size_t per_rank = count / static_cast<std::size_t>(size);
  std::vector<float> in(std::max<std::size_t>(count, 1), 1.0F);
  std::vector<float> out(std::max<std::size_t>(count, 1));
  const int block = static_cast<int>(per_rank);
  // The same variants as the benchmark's backend rows: all-reduce and all-gather in place.
  auto call = [&] {
    if (op == "all_reduce") {
      MPI_Allreduce(MPI_IN_PLACE, out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    } else if (op == "all_gather") {
      MPI_Allgather(MPI_IN_PLACE, block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "reduce_scatter") {
      MPI_Reduce_scatter_block(in.data(), out.data(), block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (op == "all_to_all") {
      MPI_Alltoall(in.data(), block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "all_to_all_in_place") {
      MPI_Alltoall(MPI_IN_PLACE, block, MPI_FLOAT, out.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
    } else if (op == "broadcast") {
      MPI_Bcast(in.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    } else {
      throw InvalidArgument("no raw MPI baseline for '" + op + "'");
    }
  };
  call();
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  return (MPI_Wtime() - start) / iterations;
}

namespace {

void write_fully(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t wrote = ::write(fd, text.data() + done, text.size() - done);
    if (wrote <= 0) return;  // Nothing sensible is left to do with a failing stderr.
    done += static_cast<std::size_t>(wrote);
  }
}

}  // namespace

int run_spmd(int* argc, char*** argv, int local_ranks,
             const std::function<void(Communicator&)>& fn) {
  Backend backend = Backend::kLocal;
  try {
    backend = choose_backend(argc, argv);
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  if (backend == Backend::kLocal) {
    try {
      run_local(local_ranks, fn);
      return 0;
    } catch (const Error& e) {
      std::cerr << e.what() << '\n';
      return 1;
    }
  }
  MpiSession session(argc, argv);
  try {
    fn(session.world());
  } catch (const std::exception& e) {
    // One write(2) for the whole line: mpirun forwards each write as it comes, and a line
    // written in pieces gets its own abort banner spliced into the middle of it.
    std::string line = "rank ";
    line.append(std::to_string(session.world().rank())).append(" failed: ").append(e.what());
    line.push_back('\n');
    std::cout.flush();
    write_fully(STDERR_FILENO, line);
    session.abort(1);
  }
  return 0;
}

}  // namespace shardwise
