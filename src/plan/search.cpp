#include "shardwise/plan/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <map>
#include <tuple>
#include "shardwise/core/error.hpp"

namespace shardwise::plan {
namespace {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    out.push_back(d);
    if (d != n / d) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", value);
  return text;
}

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

std::string why_slower(const Prediction& p, const Prediction& best) {
  if (!p.fits) {
    return "does not fit: " + gib(p.memory.total()) + " per device";
  }
  const double ratio = p.step_time_s / best.step_time_s;
  if (ratio <= 1 + 5e-4) {
    return "as fast, " + gib(p.memory.total()) + " per device against " + gib(best.memory.total());
  }
  char head[48];
  std::snprintf(head, sizeof head, "%.2g%% slower: ", (ratio - 1) * 100);
  const double compute = p.compute_time_s - best.compute_time_s;
  const double bubble = p.bubble_time_s - best.bubble_time_s;
  const double comm = p.comm_time_s - best.comm_time_s;
  if (bubble >= compute && bubble >= comm) {
    return head + std::string("pipeline bubble ") + seconds(p.bubble_time_s) + " against " +
           seconds(best.bubble_time_s);
  }
  if (comm >= compute) {
    return head + std::string("exposed communication ") + seconds(p.comm_time_s) + " against " +
           seconds(best.comm_time_s);
  }
  return head + std::string("compute (recomputation) ") + seconds(p.compute_time_s) + " against " +
         seconds(best.compute_time_s);
}

}  // namespace

SearchResult search_layouts(const ModelShape& model, const Cluster& cluster,
                            const TrainingSetup& setup, const SearchOptions& options) {
  std::vector<Prediction> all;
  SearchResult result;
  // By ZeRO group size, model degree and expert degree.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<std::int64_t>> chunks;
  // A Mixture of Experts' experts may be split over an expert axis of any degree dividing them.
  const std::int64_t experts =
      model.transformer ? static_cast<std::int64_t>(model.transformer->experts) : 0;
  const std::int64_t n = cluster.devices;
  for (std::int64_t t : divisors(n)) {
    if (options.model_within_node && t > cluster.devices_per_node) continue;
    for (std::int64_t p : divisors(n / t)) {
      if (model.layers % p != 0) continue;
      const std::int64_t dp = n / (t * p);
      if (setup.global_batch % (dp * setup.micro_batch) != 0) continue;
      const std::int64_t m = setup.global_batch / (dp * setup.micro_batch);
      std::vector<std::pair<ScheduleKind, std::int64_t>> schedules{{ScheduleKind::kOneFOneB, 1}};
      if (p > 1) {
        schedules.emplace_back(ScheduleKind::kGPipe, 1);
        for (std::int64_t v : divisors(model.layers / p)) {
          if (v >= 2 && m % p == 0) schedules.emplace_back(ScheduleKind::kInterleaved1F1B, v);
        }
      }
      for (std::int64_t e : divisors(dp)) {
        if (e > 1 && (experts == 0 || experts % e != 0)) continue;
        for (std::int64_t fsdp : divisors(dp / e)) {
          for (int zero = fsdp > 1 ? 1 : 0; zero <= 3; ++zero) {
            for (const auto& [schedule, v] : schedules) {
              Layout l{dp / e / fsdp,
                       fsdp,
                       t,
                       p,
                       zero,
                       m,
                       schedule,
                       v,
                       options.recompute,
                       options.sequence_parallel && t > 1,
                       {},  // an even split: the search leaves uneven ones out
                       e};
              if (layout_problem(model, cluster, setup, l)) continue;
              const std::int64_t group = zero_group(l);
              auto found = chunks.find({group, t, e});
              if (found == chunks.end()) {
                found =
                    chunks.emplace(std::tuple{group, t, e}, zero_chunks(model, group, t, e)).first;
              }
              try {
                all.push_back(evaluate(model, cluster, setup, l, found->second));
              } catch (const InvalidArgument& error) {  // beyond what the planner counts: skipped
                if (result.skipped.empty()) result.skipped = error.what();
              }
            }
          }
        }
      }
    }
  }
  result.evaluated = all.size();
  result.fitting = static_cast<std::size_t>(
      std::count_if(all.begin(), all.end(), [](const Prediction& p) { return p.fits; }));
  std::stable_sort(all.begin(), all.end(), [](const Prediction& a, const Prediction& b) {
    if (a.fits != b.fits) return a.fits;
    if (!a.fits) return a.memory.total() < b.memory.total();
    return a.step_time_s < b.step_time_s;
  });
  // Those within 0.05% of the best's step time are as fast: the one with more memory to spare
  // first among them.
  if (!all.empty() && all.front().fits) {
    const double limit = all.front().step_time_s * (1 + 5e-4);
    const auto tied = std::find_if(all.begin(), all.end(), [&](const Prediction& p) {
      return !p.fits || p.step_time_s > limit;
    });
    std::stable_sort(all.begin(), tied, [](const Prediction& a, const Prediction& b) {
      return a.memory.total() < b.memory.total();
    });
  }
  for (std::size_t i = 0; i < all.size() && i < options.top; ++i) {
    result.ranked.push_back({all[i], i == 0 ? std::string() : why_slower(all[i], all[0])});
  }
  return result;
}

}  // namespace shardwise::plan
