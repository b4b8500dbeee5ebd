#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "backend_flag.hpp"
#include "bench_runs.hpp"
#include "bench_runtime.hpp"
#include "command.hpp"
#include "number_text.hpp"
#include "shardwise/comm/backend_choice.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"
#include "text_table.hpp"
#ifdef SHARDWISE_HAVE_MPI
#include "shardwise/comm/mpi.hpp"
#endif

namespace shardwise::cli {
namespace {

// Threads of the local backend one benchmark runs at most.
constexpr int kMaxBenchRanks = 256;
// The largest buffer one benchmark row uses.
constexpr std::int64_t kMaxBenchBytes = std::int64_t{4} << 30;

// "4K", "64M", "1G" or plain bytes, 4 bytes to 4 GiB.
std::int64_t parse_size(const std::string& text, std::string_view flag) {
  const std::size_t digits = text.find_first_not_of("0123456789");
  const std::string number = text.substr(0, digits);
  const std::string suffix = digits == std::string::npos ? "" : text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty() || number.empty()) {
    throw InvalidArgument(std::string(flag) + ": size '" + text +
                          "' is not a number of bytes (such as 4096, 64K, 16M, 1G)");
  }
  const std::int64_t value = number.size() > 12 ? kMaxBenchBytes + 1 : integer(number, flag);
  if (value > (kMaxBenchBytes >> shift) || (value << shift) < 4) {
    throw InvalidArgument(std::string(flag) + ": size '" + text + "' is outside 4 bytes to 4G");
  }
  return value << shift;
}

// Rank counts of the local backend, each 1 to kMaxBenchRanks.
int parse_ranks(const std::string& text, std::string_view flag) {
  const std::int64_t ranks = integer(text, flag);
  if (ranks < 1 || ranks > kMaxBenchRanks) {
    throw InvalidArgument(std::string(flag) + " is " + text + "; expected 1 to " +
                          std::to_string(kMaxBenchRanks) + " ranks");
  }
  return static_cast<int>(ranks);
}

// Refuses a benchmark whose buffers would take more than half of this machine's memory.
std::string fixed(double value, int digits = 2) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// Runs `fn` on every rank count: where ranks are processes (mpi), once on the launcher's
// world (only rank 0 gets rows to print; the others get nullopt); where they are threads,
// once per count. fn's flag: whether raw MPI calls can run beside ours.
template <typename Row>
std::optional<std::vector<Row>> on_each_world(
    const BackendInfo& backend, const std::vector<int>& ranks,
    const std::function<std::vector<Row>(Communicator&, bool)>& fn) {
  const bool raw_mpi = backend.name == "mpi";
  std::mutex mutex;
  std::vector<Row> rows;
  bool rank_zero = false;
  for (int r : ranks) {
    backend.run(nullptr, nullptr, r, [&](Communicator& comm) {
      std::vector<Row> mine = fn(comm, raw_mpi);
      if (comm.rank() == 0) {
        std::lock_guard lock(mutex);
        rows.insert(rows.end(), mine.begin(), mine.end());
        rank_zero = true;
      }
    });
    if (backend.rank_per_process) break;  // the launcher's world is the only one
  }
  if (!rank_zero) return std::nullopt;
  return rows;
}

class BenchCommand final : public Command {
 public:
  explicit BenchCommand(CLI::App& parent)
      : app_(parent.add_subcommand("bench",
                                   "Measure collectives, resharding and the runtime's "
                                   "overlap against baselines of the same run: a memcpy of "
                                   "the same bytes, and MPI's own calls under mpirun")) {
    app_->require_subcommand(1);
    comm_ = app_->add_subcommand("comm", "Time, algorithm and bus bandwidth of each collective");
    comm_
        ->add_option("--ranks", ranks_,
                     "Rank counts of the local backend, 1 to 256 (ignored under mpirun)")
        ->delimiter(',')
        ->default_val(std::vector<std::string>{"2"});
    comm_->add_option("--sizes", sizes_, "Sizes in bytes (4K, 1M, ...)")
        ->delimiter(',')
        ->default_val(std::vector<std::string>{"4K", "64K", "1M", "16M", "64M"});
    comm_->add_option("--ops", ops_, "Collectives")
        ->delimiter(',')
        ->default_val(std::vector<std::string>{"all_reduce", "all_gather", "reduce_scatter",
                                               "all_to_all", "all_to_all_in_place"});
    comm_->add_flag("--json", json_, "One JSON object per row");
    comm_->add_option("--backend", backend_,
                      "local or mpi (default: SHARDWISE_BACKEND, else mpi under mpirun)");
    reshard_ = app_->add_subcommand("reshard", "Every pair of shardings of a 2 x (n/2) mesh");
    reshard_->add_option("--ranks", reshard_ranks_, "Ranks of the local backend (even, 2 to 256)")
        ->default_val("8");
    reshard_->add_option("--bytes", reshard_bytes_, "Array size (4K, 64M, 256M, ...)")
        ->default_val("64M");
    reshard_->add_flag("--json", json_, "One JSON object per row");
    runtime_ = app_->add_subcommand(
        "runtime",
        "Overlap of an all-reduce with computing, cached reshards against bare "
        "collectives on sub-communicators, reshard against reshard_into");
    runtime_->add_option("--ranks", runtime_ranks_, "Ranks of the local backend (even, 2 to 256)")
        ->default_val("8");
    runtime_->add_option("--overlap-bytes", overlap_bytes_, "All-reduce size of the overlap row")
        ->default_val("16M");
    runtime_->add_option("--bytes", runtime_bytes_, "Array size of the reshard row")
        ->default_val("64M");
    runtime_->add_flag("--json", json_, "One JSON object per row");
    runtime_->add_option("--backend", backend_,
                         "local or mpi (default: SHARDWISE_BACKEND, else mpi under mpirun)");
    reshard_->add_option("--backend", backend_,
                         "local or mpi (default: SHARDWISE_BACKEND, else mpi under mpirun)");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    if (comm_->parsed()) {
      run_comm(out);
    } else if (runtime_->parsed()) {
      run_runtime(out);
    } else {
      run_reshard(out);
    }
  }

 private:
  void run_comm(std::ostream& out) const {
    std::vector<std::int64_t> sizes;
    for (const std::string& s : sizes_) sizes.push_back(parse_size(s, "--sizes"));
    std::vector<int> ranks;
    for (const std::string& r : ranks_) ranks.push_back(parse_ranks(r, "--ranks"));
    // Checked here, before any rank starts: a rank's failure is the runtime's (exit 3).
    for (const std::string& op : ops_) {
      if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" &&
          op != "all_to_all" && op != "all_to_all_in_place" && op != "broadcast") {
        throw InvalidArgument("--ops: '" + echo_input(op) +
                              "' is not one of all_reduce, all_gather, reduce_scatter, "
                              "all_to_all, all_to_all_in_place, broadcast");
      }
    }
    const BackendInfo& backend = backend_from(backend_);
    for (const std::int64_t size : sizes) {
      // Input, output and the memcpy baseline's two buffers, on every rank of this process.
      const int most_ranks = backend.rank_per_process
                                 ? processes_on_this_node()
                                 : *std::max_element(ranks.begin(), ranks.end());
      check_fits(4 * size * most_ranks, "--sizes " + with_thousands(size));
    }
    const auto measured = on_each_world<CommBenchRow>(
        backend, ranks,
        [&](Communicator& comm, bool mpi) { return bench_collectives(comm, ops_, sizes, mpi); });
    if (!measured) return;
    const std::vector<CommBenchRow>& rows = *measured;
    if (json_) {
      for (const CommBenchRow& r : rows) {
        nlohmann::ordered_json row = {{"op", r.op},
                                      {"backend", r.backend},
                                      {"ranks", r.ranks},
                                      {"bytes", r.bytes},
                                      {"seconds", r.seconds},
                                      {"algbw_gbps", r.algbw_gbps},
                                      {"busbw_gbps", r.busbw_gbps},
                                      {"memcpy_gbps", r.memcpy_gbps}};
        row["mpi_raw_busbw_gbps"] = r.mpi_raw_busbw_gbps
                                        ? nlohmann::ordered_json(*r.mpi_raw_busbw_gbps)
                                        : nlohmann::ordered_json(nullptr);
        out << row.dump() << '\n';
      }
      return;
    }
    std::vector<std::vector<std::string>> table{{"op", "backend", "ranks", "bytes", "time (us)",
                                                 "algbw GB/s", "busbw GB/s", "memcpy GB/s",
                                                 "busbw/memcpy", "raw MPI busbw"}};
    for (const CommBenchRow& r : rows) {
      table.push_back({r.op, r.backend, std::to_string(r.ranks), with_thousands(r.bytes),
                       fixed(r.seconds * 1e6, 1), fixed(r.algbw_gbps), fixed(r.busbw_gbps),
                       fixed(r.memcpy_gbps),
                       fixed(r.memcpy_gbps > 0 ? r.busbw_gbps / r.memcpy_gbps : 0),
                       r.mpi_raw_busbw_gbps ? fixed(*r.mpi_raw_busbw_gbps) : "-"});
    }
    out << format_table(table);
  }

  void run_reshard(std::ostream& out) const {
    const std::int64_t bytes = parse_size(reshard_bytes_, "--bytes");
    const int ranks = parse_ranks(reshard_ranks_, "--ranks");
    if (ranks % 2 != 0) {
      throw InvalidArgument("--ranks is " + reshard_ranks_ +
                            "; bench reshard needs an even number of ranks (a 2 x n/2 mesh)");
    }
    const BackendInfo& backend = backend_from(backend_);
    // Every rank holds the host array, its source and target blocks and a memcpy baseline.
    check_fits(3 * bytes * (backend.rank_per_process ? processes_on_this_node() : ranks),
               "--bytes " + reshard_bytes_);
    const auto measured = on_each_world<ReshardBenchRow>(
        backend, {ranks}, [&](Communicator& comm, bool) { return bench_reshards(comm, bytes); });
    if (!measured) return;
    const std::vector<ReshardBenchRow>& rows = *measured;
    if (json_) {
      for (const ReshardBenchRow& r : rows) {
        out << nlohmann::ordered_json{{"op", "reshard"},
                                      {"from", r.from},
                                      {"to", r.to},
                                      {"backend", r.backend},
                                      {"ranks", r.ranks},
                                      {"bytes", r.array_bytes},
                                      {"max_rank_bytes", r.max_rank_bytes},
                                      {"seconds", r.seconds},
                                      {"reshard_gbps", r.reshard_gbps},
                                      {"memcpy_gbps", r.memcpy_gbps},
                                      {"max_rank_written_bytes", r.max_rank_written_bytes},
                                      {"written_memcpy_seconds", r.written_memcpy_seconds}}
                   .dump()
            << '\n';
      }
      return;
    }
    std::vector<std::vector<std::string>> table{
        {"from", "to", "backend", "ranks", "array bytes", "most received", "time (ms)", "GB/s",
         "memcpy GB/s", "ratio", "most written", "memcpy of it (ms)", "memcpy / reshard"}};
    for (const ReshardBenchRow& r : rows) {
      table.push_back(
          {r.from, r.to, r.backend, std::to_string(r.ranks), with_thousands(r.array_bytes),
           with_thousands(r.max_rank_bytes), fixed(r.seconds * 1e3, 1), fixed(r.reshard_gbps),
           fixed(r.memcpy_gbps), r.memcpy_gbps > 0 ? fixed(r.reshard_gbps / r.memcpy_gbps) : "-",
           with_thousands(r.max_rank_written_bytes), fixed(r.written_memcpy_seconds * 1e3, 1),
           r.seconds > 0 ? fixed(r.written_memcpy_seconds / r.seconds) : "-"});
    }
    out << format_table(table);
  }

  void run_runtime(std::ostream& out) const {
    const std::int64_t overlap = parse_size(overlap_bytes_, "--overlap-bytes");
    const std::int64_t bytes = parse_size(runtime_bytes_, "--bytes");
    const int ranks = parse_ranks(runtime_ranks_, "--ranks");
    if (ranks % 2 != 0) {
      throw InvalidArgument("--ranks is " + runtime_ranks_ +
                            "; bench runtime needs an even number of ranks (a 2 x n/2 mesh)");
    }
    const BackendInfo& backend = backend_from(backend_);
    check_fits(4 * std::max(overlap, bytes) * (backend.rank_per_process ? 1 : ranks),
               "bench runtime");
    const auto measured = on_each_world<RuntimeBenchRow>(
        backend, {ranks},
        [&](Communicator& comm, bool) { return bench_runtime(comm, overlap, bytes); });
    if (!measured) return;
    if (json_) {
      for (const RuntimeBenchRow& r : *measured) {
        out << nlohmann::ordered_json{{"op", r.name},
                                      {"backend", r.backend},
                                      {"ranks", r.ranks},
                                      {"bytes", r.bytes},
                                      {"seconds", r.seconds},
                                      {"baseline_seconds", r.baseline_seconds},
                                      {"ratio", r.ratio},
                                      {"note", r.note}}
                   .dump()
            << '\n';
      }
      return;
    }
    std::vector<std::vector<std::string>> table{
        {"measure", "backend", "ranks", "bytes", "time (ms)", "baseline (ms)", "ratio", "note"}};
    for (const RuntimeBenchRow& r : *measured) {
      table.push_back({r.name, r.backend, std::to_string(r.ranks), with_thousands(r.bytes),
                       fixed(r.seconds * 1e3, 2), fixed(r.baseline_seconds * 1e3, 2),
                       fixed(r.ratio), r.note});
    }
    out << format_table(table);
  }

  CLI::App* app_;
  CLI::App* comm_;
  CLI::App* reshard_;
  CLI::App* runtime_;
  std::string runtime_ranks_;
  std::string overlap_bytes_;
  std::string runtime_bytes_;
  std::vector<std::string> ranks_;
  std::vector<std::string> sizes_;
  std::vector<std::string> ops_;
  std::string reshard_ranks_;
  std::string reshard_bytes_;
  std::optional<std::string> backend_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_bench_command(CLI::App& parent) {
  return std::make_unique<BenchCommand>(parent);
}

}  // namespace shardwise::cli
