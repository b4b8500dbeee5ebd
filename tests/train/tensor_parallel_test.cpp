// Tensor parallelism (Megatron-LM's column- and row-parallel layers, the vocabulary-parallel
// embedding and cross-entropy) trains the same GPT as one rank, alone and with data parallelism,
// FSDP and ZeRO 1 to 3: every step's loss, and every parameter after the last step assembled
// from the ranks' blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <sstream>

#include "error_of.hpp"
#include "gpt_test_model.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/half.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/tensor_parallel.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// Heads, MLP width and vocabulary divide by 2 and 4.
const models::GptConfig kConfig{2, 4, 32, 16, 256};

TrainSettings settings_for(int zero) {
  TrainSettings s;
  s.batch = 8;
  s.seq = 16;
  s.steps = 10;
  s.warmup = 2;
  s.learning_rate = 3e-3F;
  s.zero = zero;
  s.seed = 5;
  return s;
}

struct LayoutRun {
  std::vector<float> losses;                   // rank 0's
  std::vector<std::vector<float>> parameters;  // every parameter whole, after the last step
  std::vector<std::size_t> stored;             // each rank's parameter elements
};

// Trains 10 steps on `mesh` and puts every parameter back together from the ranks' blocks.
LayoutRun train_on(const Mesh& mesh, int zero, bool sequence_parallel = false) {
  const Corpus corpus = Corpus::builtin(16);
  const std::vector<ParameterSpec> whole = models::gpt_parameters(kConfig);
  LayoutRun run;
  for (const ParameterSpec& p : whole) {
    run.parameters.emplace_back(static_cast<std::size_t>(num_elements(p.shape)));
  }
  run.stored.resize(static_cast<std::size_t>(mesh.size()));
  std::mutex mutex;
  run_local(static_cast<int>(mesh.size()), [&](Communicator& comm) {
    ParallelContext context(comm, mesh);
    testing::GptModel model(kConfig, 42, context, std::nullopt, sequence_parallel);
    Trainer trainer(context, model, corpus, settings_for(zero));
    std::vector<float> losses;
    for (int step = 0; step < 10; ++step) losses.push_back(trainer.step().loss);
    const std::vector<float> mine = trainer.full_parameters();
    const ParameterStore& store = model.parameters();
    std::lock_guard lock(mutex);
    run.stored[static_cast<std::size_t>(comm.rank())] = store.parameter_elements();
    if (comm.rank() == 0) run.losses = losses;
    for (std::size_t p = 0; p < whole.size(); ++p) {
      const ParameterSpec& held = store.specs()[p];
      const float* values = mine.data() + store.offset(p);
      std::vector<float>& out = run.parameters[p];
      if (held.block.empty()) {
        std::copy(values, values + store.count(p), out.begin());
        continue;
      }
      // Row-major block of a 1-, 2- or 3-dimensional whole.
      const Shape& shape = held.shape;
      const Shape& full = held.global_shape;
      const std::size_t rank = shape.size();
      std::vector<std::int64_t> at(rank, 0);
      for (std::size_t i = 0; i < store.count(p); ++i) {
        std::int64_t index = 0;
        for (std::size_t d = 0; d < rank; ++d)
          index = index * full[d] + held.block[d].start + at[d];
        out[static_cast<std::size_t>(index)] = values[i];
        for (std::size_t d = rank; d-- > 0;) {
          if (++at[d] < shape[d]) break;
          at[d] = 0;
        }
      }
    }
  });
  return run;
}

TEST(TensorParallel, EveryLayoutWithAModelAxisMatchesOneRankWithAndWithoutSequenceParallelism) {
  const LayoutRun one = train_on(Mesh::parse("data=1"), 0);
  ASSERT_EQ(one.losses.size(), 10U);
  EXPECT_LT(one.losses.back(), one.losses.front());
  double worst_loss = 0;
  double worst_parameter = 0;
  for (const auto& [mesh, zero, sequence_parallel] :
       std::vector<std::tuple<std::string, int, bool>>{{"model=2", 0, false},
                                                       {"model=4", 0, false},
                                                       {"data=2,model=2", 0, false},
                                                       {"data=2,model=2", 1, false},
                                                       {"fsdp=2,model=2", 1, false},
                                                       {"fsdp=2,model=2", 2, false},
                                                       {"fsdp=2,model=2", 3, false},
                                                       {"data=2,fsdp=2,model=2", 3, false},
                                                       {"model=2", 0, true},
                                                       {"model=4", 0, true},
                                                       {"fsdp=2,model=2", 1, true},
                                                       {"fsdp=2,model=2", 2, true},
                                                       {"data=2,fsdp=2,model=2", 3, true}}) {
    const LayoutRun many = train_on(Mesh::parse(mesh), zero, sequence_parallel);
    const std::string where =
        mesh + " zero " + std::to_string(zero) + (sequence_parallel ? " sequence parallel" : "");
    for (std::size_t s = 0; s < one.losses.size(); ++s) {
      const double deviation =
          std::abs(static_cast<double>(many.losses[s] - one.losses[s])) / one.losses[s];
      worst_loss = std::max(worst_loss, deviation);
      EXPECT_LT(deviation, 1e-5) << where << ", step " << s + 1;
    }
    for (std::size_t p = 0; p < one.parameters.size(); ++p) {
      for (std::size_t i = 0; i < one.parameters[p].size(); ++i) {
        const double deviation = std::abs(many.parameters[p][i] - one.parameters[p][i]);
        worst_parameter = std::max(worst_parameter, deviation);
        ASSERT_LT(deviation, 1e-4) << where << ", parameter " << p << " element " << i;
      }
    }
  }
  std::ostringstream text;
  text << std::scientific << worst_loss << " (loss), " << worst_parameter << " (parameters)";
  RecordProperty("worst_deviation", text.str());
}

TEST(TensorParallel, EachRankStoresOnlyItsBlocks) {
  const std::vector<ParameterSpec> whole = models::gpt_parameters(kConfig);
  std::int64_t split = 0;
  std::int64_t kept = 0;
  const std::vector<PartitionSpec> placements = models::gpt_model_placements(kConfig, 2);
  for (std::size_t p = 0; p < whole.size(); ++p) {
    (placements[p].all_axes().empty() ? kept : split) += num_elements(whole[p].shape);
  }
  const LayoutRun run = train_on(Mesh::parse("model=2"), 0);
  for (std::size_t stored : run.stored) {
    EXPECT_EQ(static_cast<std::int64_t>(stored), kept + split / 2);
  }
}

// No rank ever holds the whole model: under tensor parallelism it allocates its blocks only, and
// under ZeRO-3 it draws its slice of them straight from the initialisation rule, the store's
// buffers never allocated.
TEST(TensorParallel, AtZeroThreeNoRankEverAllocatesMoreThanItsSlices) {
  const Corpus corpus = Corpus::builtin(16);
  std::vector<int> allocated(4, -1);
  run_local(4, [&](Communicator& comm) {
    ParallelContext context(comm, Mesh::parse("fsdp=2,model=2"));
    testing::GptModel model(kConfig, 42, context);
    Trainer trainer(context, model, corpus, settings_for(3));
    (void)trainer.step();
    allocated[static_cast<std::size_t>(comm.rank())] = model.parameters().ever_allocated();
  });
  EXPECT_EQ(allocated, (std::vector<int>{0, 0, 0, 0}));
}

TEST(TensorParallel, TheRulesPlaceTheGptAsItsLayersSplitIt) {
  // The default rules (from the strategies) give exactly the layers' split: whole heads of Q, K
  // and V per rank (the stacked (3, C, C) split along its heads), never a contiguous cut of 3C.
  const Mesh mesh = Mesh::parse("data=2,model=2");
  const std::vector<ParameterSpec> whole = models::gpt_parameters(kConfig);
  const ShardingRules rules = default_sharding_rules(ParallelismConfig::from_mesh(mesh));
  EXPECT_EQ(
      model_placements(models::gpt_manifest(kConfig), mesh, rules.axis_rules, rules.name_rules),
      models::gpt_model_placements(kConfig, 2));
  const std::size_t qkv = 2 + 2;  // the first layer's c_attn.weight
  EXPECT_EQ(whole[qkv].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(models::gpt_model_placements(kConfig, 2)[qkv], (PartitionSpec{None, "model"}));
}

TEST(TensorParallel, SizesTheDegreeDoesNotDivideAndOtherSplitsAreRefused) {
  EXPECT_THAT(error_of([] {
                (void)models::gpt_model_placements({2, 4, 32, 16, 256}, 3);
              }),
              HasSubstr("the model degree 3 does not divide the 4 attention heads (n_head)"));
  EXPECT_THAT(error_of([] {
                (void)models::gpt_model_placements({2, 4, 32, 16, 258}, 4);
              }),
              HasSubstr("does not divide the 258 vocabulary"));
  run_local(2, [](Communicator& comm) {
    ParallelContext context(comm, Mesh::parse("model=2"));
    std::vector<PartitionSpec> placements = models::gpt_model_placements(kConfig, 2);
    placements[2 + 8] = PartitionSpec{None, "model"};  // the MLP's first layer, by input
    EXPECT_THAT(error_of([&] { testing::GptModel model(kConfig, 1, context, placements); }),
                HasSubstr("parameter 'transformer.h.0.mlp.c_fc.weight' would be split for "
                          "good by P(None, 'model'); the model's layers split it by "
                          "P('model')"));
  });
}

}  // namespace
}  // namespace shardwise::train

namespace shardwise::train {
namespace {

// Rank 1 fails in the middle of its second step, between two of the model axis' collectives
// (its forward has run, its backward has not), while its model peer waits in one and its data
// peer in the gradients' reduction: every rank ends with its error at every ZeRO stage, none
// waits for ever, and nothing a peer may still read is freed (ASan and TSan run this).
class FailingTensorParallelGpt final : public Model {
 public:
  FailingTensorParallelGpt(const ParallelContext& context, bool sequence_parallel)
      : inner_(kConfig, 42, context, std::nullopt, sequence_parallel), rank_(context.rank()) {}
  ParameterStore& parameters() override { return inner_.parameters(); }
  float forward_backward(std::span<const std::int32_t> tokens,
                         std::span<const std::int32_t> targets, std::size_t sequences,
                         std::size_t seq, bool with_grads, const GradientsReady& ready,
                         float loss_scale) override {
    if (rank_ == 1 && ++calls_ == 2) {
      (void)inner_.forward(tokens, targets, sequences, seq, true);
      throw std::runtime_error("rank 1's model failed");
    }
    return inner_.forward_backward(tokens, targets, sequences, seq, with_grads, ready, loss_scale);
  }

 private:
  testing::GptModel inner_;
  Rank rank_;
  int calls_ = 0;
};

TEST(TensorParallel, ARankFailingMidStepEndsEveryRankAtEveryZeroStage) {
  const Corpus corpus = Corpus::builtin(16);
  for (const bool sequence_parallel : {false, true}) {
    for (int zero : {0, 1, 2, 3}) {
      EXPECT_THAT(error_of([&] {
                    run_local(4, [&](Communicator& comm) {
                      ParallelContext context(comm, Mesh::parse("fsdp=2,model=2"));
                      FailingTensorParallelGpt model(context, sequence_parallel);
                      Trainer trainer(context, model, corpus, settings_for(zero));
                      for (int step = 0; step < 4; ++step) (void)trainer.step();
                    });
                  }),
                  HasSubstr("rank 1's model failed"))
          << "zero " << zero << (sequence_parallel ? ", sequence parallel" : "");
    }
  }
}

}  // namespace
}  // namespace shardwise::train

namespace shardwise::train {
namespace {

// Activation messages in bf16: a sum travels as each rank's rounding and comes back rounded (the
// sum of roundings, rounded), a sequence gather as each rank's rounding, a reduce-scatter as the
// roundings of each rank's part; every one moves half of float32's bytes.
TEST(TensorParallel, Bf16MessagesAreTheRoundingsAndHalfTheBytes) {
  constexpr std::size_t kBatch = 2, kSeq = 4, kChannels = 3;
  const auto value = [](int rank, std::size_t i) {
    return 1.0F + 0.001F * static_cast<float>(i) + 0.3F * static_cast<float>(rank) + 0x1p-12F;
  };
  const auto rounded = [](float x) { return to_float(to_bfloat16(x)); };
  std::int64_t sent[2] = {};
  for (const DType message : {DType::kF32, DType::kBF16}) {
    run_local(2, [&](Communicator& comm) {
      const ParallelContext context(comm, Mesh({"model"}, {2}));
      const TensorParallel tp(context);
      const int rank = tp.rank();
      const bool bf16 = message == DType::kBF16;
      const std::int64_t before = context.bytes_sent_by_axes()["model"];
      const std::size_t whole = kBatch * kSeq * kChannels;
      std::vector<float> sum(whole);
      for (std::size_t i = 0; i < whole; ++i) sum[i] = value(rank, i);
      tp.sum(sum.data(), whole, message);
      std::vector<float> local(whole / 2), gathered(whole);
      for (std::size_t i = 0; i < local.size(); ++i) local[i] = value(rank, i);
      tp.gather_sequence(gathered.data(), local.data(), kBatch, kSeq, kChannels, message);
      std::vector<float> full(whole), scattered(whole / 2);
      for (std::size_t i = 0; i < whole; ++i) full[i] = value(rank, i);
      tp.reduce_scatter_sequence(scattered.data(), full.data(), kBatch, kSeq, kChannels, message);
      const std::size_t part = kSeq / 2 * kChannels;
      for (std::size_t i = 0; i < whole; ++i) {
        const float expected =
            bf16 ? rounded(rounded(value(0, i)) + rounded(value(1, i))) : value(0, i) + value(1, i);
        EXPECT_EQ(sum[i], expected) << i;
        // Element i of the whole: sequence b's position block r came from rank r.
        const std::size_t b = i / (kSeq * kChannels), r = i % (kSeq * kChannels) / part;
        const float from = value(static_cast<int>(r), b * part + i % part);
        EXPECT_EQ(gathered[i], bf16 ? rounded(from) : from) << i;
      }
      for (std::size_t i = 0; i < scattered.size(); ++i) {
        const std::size_t b = i / part;
        const std::size_t at = (b * 2 + static_cast<std::size_t>(rank)) * part + i % part;
        const float expected = bf16 ? rounded(rounded(value(0, at)) + rounded(value(1, at)))
                                    : value(0, at) + value(1, at);
        EXPECT_EQ(scattered[i], expected) << i;
      }
      if (rank == 0) sent[bf16] = context.bytes_sent_by_axes()["model"] - before;
    });
  }
  EXPECT_GT(sent[0], 0);
  EXPECT_EQ(2 * sent[1], sent[0]);
}

}  // namespace
}  // namespace shardwise::train
