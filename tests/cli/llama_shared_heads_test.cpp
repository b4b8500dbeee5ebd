// Replicated key/value heads (train::SharedRows): the sum among the ranks sharing a head, the
// blocks local_parameters gives and refuses, and a chunk refusing a store holding another
// rank's head. The layouts' losses are TrainLlama's and TrainCheckpoint's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "run_command.hpp"
#include "shardwise/comm/run_local.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/llama.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/placement.hpp"
#include "shardwise/train/tensor_parallel.hpp"

namespace shardwise {
namespace {

using shardwise::testing::error_of;
using ::testing::HasSubstr;

std::shared_ptr<const train::ModelDefinition> llama_micro() {
  const std::string file = cli::testing::source_path("examples/models/llama_micro.json");
  return models::model_from_config(nlohmann::json::parse(std::ifstream(file)).dump(),
                                   "llama_micro.json");
}

// Ranks 0-1 and 2-3 of model=4 sum among themselves; all four with 4 sharers; none with 1.
TEST(SharedKeyValueHeads, SumAmongAddsOverTheRanksSharingABlockOnly) {
  const Mesh mesh({"model"}, {4});
  run_local(4, [&](Communicator& comm) {
    const train::ParallelContext context(comm, mesh);
    const train::TensorParallel tp(context);
    const auto r = static_cast<float>(tp.rank());
    for (int round = 0; round < 2; ++round) {  // the sharers' group made once, then reused
      std::vector<float> values(3, r + 1);
      tp.sum_among(values.data(), values.size(), 2);
      EXPECT_THAT(values, ::testing::Each(tp.rank() < 2 ? 3.0F : 7.0F)) << tp.rank();
      tp.sum_among(values.data(), values.size(), 4);
      EXPECT_THAT(values, ::testing::Each(20.0F)) << tp.rank();
      tp.sum_among(values.data(), values.size(), 1);
      EXPECT_THAT(values, ::testing::Each(20.0F)) << tp.rank();
    }
    float one = 1;
    EXPECT_THAT(error_of([&] { tp.sum_among(&one, 1, 3); }),
                HasSubstr("a sum among 3 of 4 model ranks: the count must divide them"));
    EXPECT_THAT(error_of([&] { tp.sum_among(&one, 1, 0); }), HasSubstr("a sum among 0 of 4"));
  });
}

// A rank failing before its sum among its pair ends its partner, waiting in that sum, and the
// other pair, waiting in the next sum over the whole axis: one error naming it, never a hang.
TEST(SharedKeyValueHeads, ASharerThatFailsEndsItsPartnerAndTheOtherPair) {
  const Mesh mesh({"model"}, {4});
  EXPECT_THAT(error_of([&] {
                run_local(4, [&](Communicator& comm) {
                  const train::ParallelContext context(comm, mesh);
                  const train::TensorParallel tp(context);
                  std::vector<float> values(1000, 1.0F);
                  if (tp.rank() == 2) throw InvalidArgument("rank 2's head failed");
                  tp.sum_among(values.data(), values.size(), 2);
                  tp.sum(values.data(), values.size());
                });
              }),
              HasSubstr("rank 2's head failed"));
}

// Every rank's block of a shared projection, and what cannot be shared refused by name.
TEST(SharedKeyValueHeads, LocalParametersGiveEachRankItsHeadAndRefuseWhatCannotBeShared) {
  const auto model = llama_micro();
  const Mesh mesh({"model"}, {4});
  const std::vector<train::ParameterSpec> whole = model->parameters();
  const std::vector<PartitionSpec> placements = model->model_placements(4);
  const std::vector<train::SharedRows> shared = model->shared_rows(4);
  ASSERT_EQ(shared.size(), 2 * model->layers());
  for (std::int64_t rank = 0; rank < 4; ++rank) {
    const auto held = train::local_parameters(whole, mesh, rank, placements, shared);
    for (const train::SharedRows& rows : shared) {
      const train::ParameterSpec& spec = held[rows.parameter];
      EXPECT_EQ(spec.shape, (Shape{8, 32})) << spec.name;
      EXPECT_EQ(spec.global_shape, (Shape{16, 32})) << spec.name;
      EXPECT_EQ(spec.block[0].start, rank / 2 * 8) << spec.name << " on " << rank;
      EXPECT_EQ(spec.gradient.model_sharers, 2U);
    }
    EXPECT_EQ(held[2].gradient.model_sharers, 1U) << held[2].name;  // q_proj: split, not shared
  }
  const auto refused = [&](std::vector<train::SharedRows> rows) {
    return error_of([&] { (void)train::local_parameters(whole, mesh, 0, placements, rows); });
  };
  EXPECT_THAT(refused({{3, 3}}), HasSubstr("parameter 'model.layers.0.self_attn.k_proj.weight' "
                                           "of shape (16, 32) placed by P() cannot have its rows "
                                           "shared in 3 blocks by 4 model ranks"));
  EXPECT_THAT(refused({{2, 2}}), HasSubstr("'model.layers.0.self_attn.q_proj.weight' of shape "
                                           "(32, 32) placed by P('model') cannot"));
  EXPECT_THAT(refused({{3, 32}}), HasSubstr("cannot have its rows shared in 32 blocks"));
  EXPECT_THAT(refused({{3, 0}}), HasSubstr("shared rows of parameter 3 in 0 blocks"));
  EXPECT_THAT(refused({{whole.size(), 2}}),
              HasSubstr("shared rows of parameter " + std::to_string(whole.size())));
}

// A store of the right shapes but another rank's head is refused before any step.
TEST(SharedKeyValueHeads, AChunkRefusesAStoreHoldingAnotherRanksHead) {
  const auto model = llama_micro();
  const Mesh mesh({"model"}, {4});
  run_local(4, [&](Communicator& comm) {
    const train::ParallelContext context(comm, mesh);
    const std::int64_t other = (comm.rank() + 2) % 4;  // the other pair's head
    train::ParameterStore store(train::local_parameters(
        model->parameters(), mesh, other, model->model_placements(4), model->shared_rows(4)));
    train::ChunkOptions options;
    options.range = {0, model->layers()};
    options.tensor_parallel = train::TensorParallel(context);
    const std::string first = comm.rank() < 2 ? "[0, 8)" : "[8, 16)";
    EXPECT_THAT(error_of([&] { (void)model->build_chunk(store, options); }),
                HasSubstr("parameter 'model.layers.0.self_attn.k_proj.weight' holds rows"))
        << comm.rank();
    EXPECT_THAT(error_of([&] { (void)model->build_chunk(store, options); }),
                HasSubstr("its queries read rows " + first))
        << comm.rank();
  });
}

// `specs` of a Hugging Face config (its own parameter order) marks the projections the trainer
// shares, and nothing else: TinyLlama's 4 key/value heads on model=8, each on 2 ranks.
TEST(SharedKeyValueHeads, SpecsOfAHuggingFaceConfigShowTheSharedHeadsByName) {
  const cli::testing::Result r = cli::testing::run_command(
      {"specs", "--model", cli::testing::source_path("examples/models/tinyllama.json"), "--mesh",
       "model=8", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  std::size_t shared = 0;
  for (const auto& p : json["parameters"]) {
    const std::string name = p["name"];
    const bool kv =
        name.find("k_proj") != std::string::npos || name.find("v_proj") != std::string::npos;
    if (kv) {
      ++shared;
      EXPECT_EQ(p["shard_shape"], nlohmann::json({256, 2048})) << name;  // JAX's: whole
      EXPECT_EQ(p["held_shape"], nlohmann::json({64, 2048})) << name;    // the trainer's head
    } else {
      EXPECT_EQ(p["held_shape"], p["shard_shape"]) << name;
    }
  }
  EXPECT_EQ(shared, 44U);
  const std::string notes = json["notes"].dump();
  EXPECT_THAT(notes, HasSubstr("and 43 more: replicated key/value heads, which the trainer holds "
                               "rows in 4 blocks over 'model', each on 2 ranks: (64, 2048) a "
                               "device (held_shape)"));
}

}  // namespace
}  // namespace shardwise
