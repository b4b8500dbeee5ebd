// Which block of each parameter a ZeRO rank keeps comes from the strategies: FSDP's rule for
// dimension 0 (the reference's apply_sharding, FSDP2's Shard(0)), FSDP's logical-axis rules
// (MaxText's "embed"), or any rules through the layout `shardwise specs` shows. The paths that
// answer the same question are compared here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/strategy/model_layout.hpp"
#include "shardwise/train/parameter_shardings.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

const models::GptConfig kTiny{4, 4, 128, 64, 256};

TEST(ParameterShardings, TheDefaultSplitsEveryParameterAlongItsFirstDimension) {
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kTiny);
  const ParameterShardings shardings = default_shardings(specs, "fsdp", 4);
  ASSERT_EQ(shardings.specs.size(), specs.size());
  for (std::size_t p = 0; p < specs.size(); ++p) {
    // The stacked Q, K and V (3, C, C) give way to their next dimension.
    const bool stacked = specs[p].shape.front() == 3;
    EXPECT_EQ(shardings.specs[p].dimension_of("fsdp"), stacked ? 1 : 0) << specs[p].name;
    EXPECT_THAT(shardings.reasons[p],
                HasSubstr(stacked ? "dimension 1 split instead" : "dimension 0 split over 'fsdp'"));
  }
  // Every parameter of tiny has a dimension 4 divides: exactly a quarter of the elements.
  const ParameterStore store(specs);
  EXPECT_EQ(shardings.shard_elements(specs) * 4,
            static_cast<std::int64_t>(store.parameter_elements()));
}

TEST(ParameterShardings, AGroupThatDividesNoDimensionSplitsDimensionZeroUnevenly) {
  // Five ranks divide none of tiny's sizes (128, 256, 384, 512, 3, 64): every parameter is
  // split anyway, along dimension 0 in torch.chunk blocks (FSDP2's), never kept whole; three
  // ranks divide the stacked Q, K and V's 3.
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kTiny);
  for (const std::int64_t ranks : {3, 5}) {
    const ParameterShardings shardings = default_shardings(specs, "fsdp", ranks);
    EXPECT_EQ(shardings.evenness, Evenness::kUneven);
    std::int64_t kept = 0;
    for (std::size_t p = 0; p < specs.size(); ++p) {
      const Shape& shape = specs[p].shape;
      EXPECT_EQ(shardings.specs[p].dimension_of("fsdp"), 0) << specs[p].name;
      if (shape[0] % ranks != 0) {
        EXPECT_THAT(shardings.reasons[p], HasSubstr("dimension 0 split unevenly"));
      }
      // A rank's slot is ceil(rows / ranks) rows.
      kept += (shape[0] + ranks - 1) / ranks * num_elements(shape) / shape[0];
    }
    EXPECT_EQ(shardings.shard_elements(specs), kept);
  }
}

TEST(ParameterShardings, LogicalAxesSplitTheEmbeddingAndReplicateNorms) {
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kTiny);
  const FSDPStrategy fsdp("fsdp", std::nullopt, 1);
  const ParameterShardings shardings = fsdp_shardings(specs, fsdp, 2, FsdpSplit::kLogicalAxes);
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const std::vector<std::string>& axes = specs[p].logical_axes;
    const auto embed = std::find(axes.begin(), axes.end(), "embed");
    const int expected = embed == axes.end() ? -1 : static_cast<int>(embed - axes.begin());
    EXPECT_EQ(shardings.specs[p].dimension_of("fsdp"), expected) << specs[p].name;
  }
}

// The rules' path (layout_model, as `shardwise specs` shows it, on the whole data x fsdp mesh)
// and the strategy's own path (on the shard group alone) give every parameter the same spec.
TEST(ParameterShardings, TheRulesLayoutAgreesWithTheStrategy) {
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kTiny);
  const FSDPStrategy fsdp("fsdp", std::nullopt, 1);
  const ParameterShardings by_strategy = fsdp_shardings(specs, fsdp, 2, FsdpSplit::kLogicalAxes);
  const Mesh mesh({"data", "fsdp"}, {2, 2});
  const ParameterNameRules no_names({});
  const ParameterShardings by_rules =
      rules_shardings(specs, mesh, "fsdp", fsdp.logical_axis_rules(), no_names);
  ASSERT_EQ(by_rules.specs.size(), specs.size());
  for (std::size_t p = 0; p < specs.size(); ++p) {
    EXPECT_EQ(by_rules.specs[p].dimension_of("fsdp"), by_strategy.specs[p].dimension_of("fsdp"))
        << specs[p].name;
  }
  EXPECT_EQ(by_rules.shard_elements(specs), by_strategy.shard_elements(specs));
}

TEST(ParameterShardings, SpecsThatDoNotFitAreNamed) {
  const std::vector<ParameterSpec> specs = models::gpt_parameters(kTiny);
  ParameterShardings shardings = default_shardings(specs, "fsdp", 2);
  ParameterShardings other_axis = shardings;
  other_axis.specs[0] = PartitionSpec{"data"};
  EXPECT_THAT(error_of([&] { other_axis.validate(specs); }),
              HasSubstr("'transformer.wte.weight' of shape (256, 128) with P('data') is split "
                        "over 'data'"));
  ParameterShardings too_many = shardings;
  too_many.specs[2] = PartitionSpec{"fsdp", SpecEntry()};
  EXPECT_THAT(error_of([&] { too_many.validate(specs); }),
              HasSubstr("'transformer.h.0.ln_1.weight'"));
  ParameterShardings missing = shardings;
  missing.specs.pop_back();
  EXPECT_THAT(error_of([&] { missing.validate(specs); }), HasSubstr("for 52 parameters"));
  // A rule that puts a parameter on the data axis: the trainer replicates over it.
  const LogicalAxisRules onto_data({LogicalAxisRule{"embed", {"data"}}});
  EXPECT_THAT(error_of([&] {
                (void)rules_shardings(specs, Mesh({"data", "fsdp"}, {2, 2}), "fsdp", onto_data,
                                      ParameterNameRules({}));
              }),
              HasSubstr("is split over 'data'; ZeRO splits parameters over 'fsdp' only"));
  EXPECT_THAT(error_of([&] {
                (void)rules_shardings(specs, Mesh({"data"}, {2}), "fsdp", onto_data,
                                      ParameterNameRules({}));
              }),
              HasSubstr("has no axis 'fsdp'"));
}

}  // namespace
}  // namespace shardwise::train
