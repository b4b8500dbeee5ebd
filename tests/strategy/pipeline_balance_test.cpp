#include "shardwise/strategy/pipeline_balance.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "error_of.hpp"
#include "shardwise/strategy/pipeline_parallel_strategy.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

// Every contiguous split, by brute force: the smallest largest stage cost.
double brute_force_best(const std::vector<double>& costs, std::size_t stages, double embedding,
                        double head) {
  double best = 1e300;
  const std::size_t n = costs.size();
  std::vector<std::size_t> cuts(stages - 1, 0);
  std::function<void(std::size_t, std::size_t)> search = [&](std::size_t index, std::size_t from) {
    if (index == stages - 1) {
      double worst = 0;
      std::size_t begin = 0;
      for (std::size_t s = 0; s < stages; ++s) {
        const std::size_t end = s + 1 < stages ? cuts[s] : n;
        if (end <= begin) return;  // every stage needs a layer
        double cost = 0;
        for (std::size_t i = begin; i < end; ++i) cost += costs[i];
        if (s == 0) cost += embedding;
        if (s + 1 == stages) cost += head;
        worst = std::max(worst, cost);
        begin = end;
      }
      best = std::min(best, worst);
      return;
    }
    for (std::size_t cut = from; cut <= n; ++cut) {
      cuts[index] = cut;
      search(index + 1, cut);
    }
  };
  search(0, 1);
  return best;
}

TEST(AssignLayersByCost, UniformCostsMatchTheEvenSplit) {
  const StageAssignment a = assign_layers_by_cost(std::vector<double>(12, 1.0), 4);
  EXPECT_THAT(a.layers_per_stage, ElementsAre(3, 3, 3, 3));
  EXPECT_THAT(a.first_layer, ElementsAre(0, 3, 6, 9));
  EXPECT_DOUBLE_EQ(a.max_stage_cost(), 3.0);
}

TEST(AssignLayersByCost, EmbeddingAndHeadAreNotFree) {
  // A head as costly as two layers pushes layers off the last stage.
  const StageAssignment a = assign_layers_by_cost(std::vector<double>(8, 1.0), 2, 0.0, 2.0);
  EXPECT_THAT(a.layers_per_stage, ElementsAre(5, 3));
  EXPECT_THAT(a.stage_costs, ElementsAre(5.0, 5.0));
  const StageAssignment b = assign_layers_by_cost(std::vector<double>(10, 1.0), 4, 2.0, 2.0);
  // 14 units over 4 stages: no split beats a slowest stage of 4.
  EXPECT_DOUBLE_EQ(b.max_stage_cost(), 4.0);
  EXPECT_EQ(
      b.layers_per_stage[0] + b.layers_per_stage[1] + b.layers_per_stage[2] + b.layers_per_stage[3],
      10);
}

TEST(AssignLayersByCost, OptimalOnRandomCosts) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> cost(0.1, 5.0);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 9)(rng);
    const std::size_t stages = std::uniform_int_distribution<std::size_t>(1, layers)(rng);
    std::vector<double> costs(layers);
    for (double& c : costs) c = cost(rng);
    const double embedding = cost(rng);
    const double head = cost(rng);
    const StageAssignment a =
        assign_layers_by_cost(costs, static_cast<std::int64_t>(stages), embedding, head);
    EXPECT_NEAR(a.max_stage_cost(), brute_force_best(costs, stages, embedding, head), 1e-9);
    std::int64_t total = 0;
    for (std::size_t s = 0; s < stages; ++s) {
      EXPECT_GE(a.layers_per_stage[s], 1);
      EXPECT_EQ(a.first_layer[s], total);
      total += a.layers_per_stage[s];
    }
    EXPECT_EQ(total, static_cast<std::int64_t>(layers));
    // Never worse than the reference's count-based split.
    const auto counts = PipelineParallelStrategy(static_cast<std::int64_t>(stages))
                            .assign_layers_to_stages(static_cast<std::int64_t>(layers));
    double reference_worst = 0;
    std::size_t begin = 0;
    for (std::size_t s = 0; s < stages; ++s) {
      double c = 0;
      for (std::int64_t i = 0; i < counts[s]; ++i) c += costs[begin++];
      if (s == 0) c += embedding;
      if (s + 1 == stages) c += head;
      reference_worst = std::max(reference_worst, c);
    }
    EXPECT_LE(a.max_stage_cost(), reference_worst + 1e-9);
  }
}

TEST(AssignLayersByCost, Errors) {
  EXPECT_THAT(error_of([] {
                (void)assign_layers_by_cost({1, 1}, 3);
              }),
              HasSubstr("2 layers cannot fill 3 pipeline stages"));
  EXPECT_THAT(assign_layers_by_cost({1, 1}, 3, 0, 0, true).layers_per_stage.size(), 3u);
  EXPECT_THAT(error_of([] {
                (void)assign_layers_by_cost({1, -1}, 1);
              }),
              HasSubstr("cost of layer 1 is -1"));
  EXPECT_THAT(error_of([] { (void)assign_layers_by_cost({1}, 0); }), HasSubstr("num_stages is 0"));
  EXPECT_THAT(error_of([] { (void)assign_layers_by_cost({1}, 1, -2); }),
              HasSubstr("embedding_cost is -2"));
}

}  // namespace
}  // namespace shardwise
