// Mixtures of Experts as a user trains them (`shardwise train --model mixtral-tiny`): Mixtral and
// Qwen3-MoE on every strategy and combination see the one rank's losses within 1e-5 over 10
// steps in float32 (the router's choices included: a choice that differed would move the loss by
// far more), and within 1e-3 in bf16; they learn; the settings not computed yet are refused
// naming them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "run_command.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::run_command;
using testing::train_ten_steps;

const std::vector<std::vector<std::string>>& every_layout() {
  static const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "fsdp=2", "--zero", "1"},
      {"--mesh", "fsdp=2", "--zero", "2"},
      {"--mesh", "fsdp=2", "--zero", "3"},
      {"--mesh", "data=2,fsdp=2", "--zero", "3"},  // HSDP
      {"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches", "4"},
      {"--mesh", "pipeline=2", "--schedule", "1f1b", "--microbatches", "4"},
      {"--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "2"},
      {"--mesh", "fsdp=2", "--zero", "3", "--recompute", "full"},
      {"--mesh", "data=2,fsdp=2,pipeline=2", "--zero", "3"}};
  return layouts;
}

// A small Qwen3-MoE's model file in the tests' folder: `layers` layers of 4 experts of width 16
// (top 2) and then `fields` (JSON members).
std::string small_qwen3_moe(const std::string& name, int layers, const std::string& fields) {
  const std::string file = ::testing::TempDir() + name;
  std::ofstream(file) << R"({"family": "qwen3_moe", "num_hidden_layers": )" << layers
                      << R"(, "hidden_size": 32, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64, "vocab_size": 256,
    "max_position_embeddings": 16, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 16, )"
                      << fields << "}";
  return file;
}

// Both families on `layouts`, in float32 (within 1e-5) and bf16 (1e-3).
void expect_both_families_see_one_rank(const std::vector<std::vector<std::string>>& layouts,
                                       const std::string& which) {
  for (const char* file : {"mixtral_micro.json", "qwen3_moe_micro.json"}) {
    const double fp32 = testing::expect_layouts_see_one_rank(file, layouts, {}, 1e-5);
    const double bf16 =
        testing::expect_layouts_see_one_rank(file, layouts, {"--precision", "bf16"}, 1e-3);
    std::cout << file << ": worst relative deviation from one rank " << which << " " << fp32
              << " (fp32), " << bf16 << " (bf16)\n";
  }
}

TEST(TrainMoe, EveryLayoutSeesTheOneRanksLosses) {
  expect_both_families_see_one_rank(every_layout(), "on the dense axes");
}

// The expert axis (each rank holding E / degree experts, tokens dispatched to them) alone and with
// every other axis: the issue's layouts, ZeRO 1 to 3 on the experts' blocks, HSDP, recomputation
// and a pipeline whose stages hold MoE layers.
const std::vector<std::vector<std::string>>& expert_layouts() {
  static const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "expert=2"},
      {"--mesh", "expert=4"},
      {"--mesh", "data=2,expert=2"},
      {"--mesh", "data=2,expert=2", "--zero", "1"},
      {"--mesh", "data=2,expert=2", "--zero", "2"},
      {"--mesh", "fsdp=2,expert=2", "--zero", "3"},
      {"--mesh", "fsdp=3,expert=2", "--zero", "3"},
      {"--mesh", "data=3,fsdp=2,expert=2", "--zero", "3"},
      {"--mesh", "expert=2", "--recompute", "full"},
      {"--mesh", "pipeline=2,expert=2", "--schedule", "1f1b", "--microbatches", "2"},
      {"--mesh", "pipeline=2,expert=2", "--schedule", "interleaved", "--microbatches", "2"},
      {"--mesh", "fsdp=2,pipeline=2,expert=2", "--zero", "3"}};
  return layouts;
}

TEST(TrainMoe, TheExpertAxisSeesTheOneRanksLosses) {
  expect_both_families_see_one_rank(expert_layouts(), "on the expert axis");
}

// The model axis folds the experts over it (each rank holding E / (model x expert) experts whole,
// expert tensor parallelism 1): attention split as usual, each model rank routing its share of
// the rows, with and without sequence parallelism, with an expert axis in either order of the
// mesh, with data, ZeRO 3, a pipeline and recomputation.
const std::vector<std::vector<std::string>>& model_layouts() {
  static const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "model=2"},
      {"--mesh", "model=2", "--sequence-parallel"},
      {"--mesh", "model=2,expert=2", "--sequence-parallel"},
      {"--mesh", "expert=2,model=2"},
      {"--mesh", "data=2,model=2", "--zero", "1"},
      {"--mesh", "fsdp=2,model=2,expert=2", "--zero", "3"},
      {"--mesh", "model=2,pipeline=2", "--sequence-parallel", "--microbatches", "2"},
      {"--mesh", "model=2", "--recompute", "full"}};
  return layouts;
}

TEST(TrainMoe, TheModelAxisFoldsTheExpertsAndSeesTheOneRanksLosses) {
  expect_both_families_see_one_rank(model_layouts(), "with the model axis");
  // Shares that are not whole sequences, and a rank routing no row: 3 rows, then 1, on 2 ranks.
  for (const char* seq : {"3", "1"}) {
    const auto run = [&](const std::vector<std::string>& mesh) {
      std::vector<std::string> args{
          "train",   "--model", testing::source_path("examples/models/mixtral_micro.json"),
          "--steps", "3",       "--batch",
          "1",       "--seq",   seq,
          "--json"};
      args.insert(args.end(), mesh.begin(), mesh.end());
      return testing::losses_of(run_command(args), std::string("--seq ") + seq);
    };
    const std::vector<double> one = run({}), folded = run({"--mesh", "model=2"});
    ASSERT_EQ(one.size(), 3U);
    ASSERT_EQ(folded.size(), 3U);
    for (std::size_t s = 0; s < 3; ++s) EXPECT_NEAR(folded[s], one[s], 1e-5 * one[s]) << seq;
  }
}

// Every row a token routes is computed once, by the rank holding its expert: over the ranks the
// rows computed add up to those routed (a dispatch that lost or repeated rows would not), and the
// summary's imbalance is the busiest rank's share over the even one, 1 where every token chooses
// every expert.
TEST(TrainMoe, TheDispatchComputesEveryRoutedRowOnceAndReportsTheImbalance) {
  const std::string balanced = ::testing::TempDir() + "moe_balanced.json";
  std::ofstream(balanced) << R"({"family": "mixtral", "num_hidden_layers": 2, "hidden_size": 32,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24,
    "vocab_size": 256, "max_position_embeddings": 16, "num_local_experts": 4,
    "num_experts_per_tok": 4})";
  for (const auto& [file, mesh] : {std::pair{std::string("mixtral_micro.json"), "expert=4"},
                                   {std::string("qwen3_moe_micro.json"), "data=2,expert=2"},
                                   {std::string("mixtral_micro.json"), "model=2,expert=2"},
                                   {balanced, "expert=2"}}) {
    const testing::Result r = run_command(train_ten_steps(file, {"--mesh", mesh}));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto summary = testing::json_lines(r.out).back()["summary"];
    std::int64_t routed = 0, computed = 0, busiest = 0;
    for (const auto& rank : summary["ranks"]) {
      routed += rank["routed_rows"].get<std::int64_t>();
      computed += rank["expert_rows"].get<std::int64_t>();
      busiest = std::max(busiest, rank["expert_rows"].get<std::int64_t>());
    }
    EXPECT_GT(routed, 0) << file;
    EXPECT_EQ(computed, routed) << file << " " << mesh;
    const double ranks = static_cast<double>(summary["ranks"].size());
    EXPECT_DOUBLE_EQ(summary["expert_imbalance"].get<double>(),
                     static_cast<double>(busiest) / (static_cast<double>(routed) / ranks))
        << file;
    if (file == balanced) {
      EXPECT_DOUBLE_EQ(summary["expert_imbalance"].get<double>(), 1.0);
    }
  }
}

// A checkpoint saved with the experts split (over fsdp x expert at ZeRO 3) loads into any expert
// degree and layout: each resumed run continues as the run that saved it did (the same losses and
// gradient norms as its steps 4 to 6), which it could not where an expert's block were saved or
// read in another's place.
TEST(TrainMoe, ACheckpointLoadsIntoAnyExpertDegree) {
  const std::string folder = ::testing::TempDir() + "moe_expert_checkpoint";
  std::filesystem::remove_all(folder);
  std::vector<std::string> saving = train_ten_steps("mixtral_micro.json", {});
  saving.insert(saving.end(), {"--mesh", "fsdp=2,expert=2", "--zero", "3", "--save", folder,
                               "--save-every", "5"});
  const testing::Result saved = run_command(saving);
  const std::vector<double> losses = testing::losses_of(saved, "the saving run");
  const std::vector<double> norms = testing::losses_of(saved, "the saving run", "grad_norm");
  ASSERT_EQ(losses.size(), 10U);
  for (const std::vector<std::string>& layout :
       std::vector<std::vector<std::string>>{{"--mesh", "data=1"},
                                             {"--mesh", "expert=4"},
                                             {"--mesh", "data=2,expert=2", "--zero", "1"},
                                             {"--mesh", "expert=2,pipeline=2"},
                                             {"--mesh", "model=2,expert=2"}}) {
    std::vector<std::string> resuming = train_ten_steps("mixtral_micro.json", layout);
    resuming.insert(resuming.end(), {"--resume", folder + "/step-00000005"});
    const testing::Result resumed = run_command(resuming);
    const std::string where = layout[1];
    const std::vector<double> after = testing::losses_of(resumed, where);
    const std::vector<double> after_norms = testing::losses_of(resumed, where, "grad_norm");
    ASSERT_EQ(after.size(), 5U) << where;
    for (std::size_t s = 0; s < 5; ++s) {
      EXPECT_NEAR(after[s], losses[5 + s], 1e-5 * losses[5 + s]) << where << " step " << 6 + s;
      EXPECT_NEAR(after_norms[s], norms[5 + s], 1e-4 * norms[5 + s]) << where << " step " << 6 + s;
    }
  }
}

// The auxiliary load-balancing loss (output_router_logits): its statistics are every layer's over
// the whole batch, summed over the batch's ranks, so every layout but a pipeline (which splits the
// layers; refused) sees the one rank's losses and gradient norms.
TEST(TrainMoe, TheAuxiliaryLossSeesTheOneRanksLossesOnEveryLayout) {
  const std::string file = small_qwen3_moe(
      "moe_auxiliary.json", 3,
      R"("norm_topk_prob": true, "output_router_logits": true, "router_aux_loss_coef": 0.5)");
  const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "expert=2"},
      {"--mesh", "data=2,expert=2", "--zero", "2", "--recompute", "full"},
      {"--mesh", "fsdp=2,expert=2", "--zero", "3"},
      {"--mesh", "model=2"},
      {"--mesh", "model=2,expert=2", "--sequence-parallel"}};
  const double fp32 = testing::expect_layouts_see_one_rank(file, layouts, {}, 1e-5);
  const double bf16 =
      testing::expect_layouts_see_one_rank(file, layouts, {"--precision", "bf16"}, 1e-3);
  std::cout << "with the auxiliary loss: worst relative deviation from one rank " << fp32
            << " (fp32), " << bf16 << " (bf16)\n";
  // It is in the loss: the same model without it trains to other losses.
  const std::string without = small_qwen3_moe(
      "moe_plain.json", 3,
      R"("norm_topk_prob": true, "output_router_logits": false, "router_aux_loss_coef": 0.5)");
  const auto with_losses = testing::losses_of(run_command(train_ten_steps(file, {})), file);
  const auto plain = testing::losses_of(run_command(train_ten_steps(without, {})), without);
  ASSERT_EQ(with_losses.size(), plain.size());
  EXPECT_GT(with_losses[0], plain[0] + 0.5 * 2 * 0.9);  // about coef x k more
  expect_bad_input(train_ten_steps(file, {"--mesh", "pipeline=2"}),
                   "--mesh: 2 pipeline stages split the layers, and the auxiliary load-balancing "
                   "loss (output_router_logits) couples every layer's routing");
}

// A capacity factor drops each sequence's choices past an expert's capacity, whatever the layout:
// every layout sees the one rank's losses and drops as many rows, which the summary reports.
TEST(TrainMoe, ACapacityFactorDropsAlikeOnEveryLayout) {
  const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "expert=2"},
      {"--mesh", "fsdp=2,expert=2", "--zero", "3"},
      {"--mesh", "pipeline=2", "--microbatches", "2"},
      {"--mesh", "model=2,expert=2", "--sequence-parallel"}};
  const std::vector<std::string> capacity{"--capacity-factor", "1.0"};
  const double worst =
      testing::expect_layouts_see_one_rank("mixtral_micro.json", layouts, capacity, 1e-5);
  std::cout << "with a capacity factor of 1: worst relative deviation " << worst << "\n";
  const auto dropped = [&](const std::vector<std::string>& flags) {
    const testing::Result r = run_command(train_ten_steps("mixtral_micro.json", flags));
    EXPECT_EQ(r.status, 0) << r.err;
    return testing::json_lines(r.out).back()["summary"]["dropped_fraction"].get<double>();
  };
  const double one = dropped(capacity);
  EXPECT_GT(one, 0.05);
  for (std::vector<std::string> layout : layouts) {
    layout.insert(layout.end(), capacity.begin(), capacity.end());
    EXPECT_DOUBLE_EQ(dropped(layout), one) << layout[1];
  }
  // Dropless by default; a generous factor drops nothing.
  const testing::Result dropless = run_command(train_ten_steps("mixtral_micro.json", {}));
  EXPECT_EQ(testing::json_lines(dropless.out).back()["summary"]["dropped_fraction"], 0.0);
  EXPECT_DOUBLE_EQ(dropped({"--capacity-factor", "100"}), 0.0);
  expect_bad_input(train_ten_steps("gpt_micro.json", capacity),
                   "--capacity-factor 1.000000 caps a Mixture of Experts' experts; --model has "
                   "no experts");
  // Over a model axis each rank routes whole sequences, which a micro-batch of 3 does not give.
  expect_bad_input(
      train_ten_steps("mixtral_micro.json", {"--mesh", "model=2,pipeline=2", "--microbatches", "4",
                                             "--capacity-factor", "1"}),
      "--capacity-factor 1.000000 over 2 model ranks, each routing whole sequences: "
      "a micro-batch's 3 sequences do not divide among them");
  expect_bad_input(train_ten_steps("mixtral_micro.json", {"--capacity-factor", "-2"}),
                   "--capacity-factor is -2.000000; expected 0 (dropless)");
}

// torchtitan's auxiliary-loss-free expert bias: each layer's bias moves after each step from the
// choices counted over every rank that routes rows, so every layout sees the one rank's losses;
// it is in the routing (the losses are not those of a run without it); a checkpoint carries it
// (a run resumed elsewhere continues as the saving run did, which it would not with the bias
// at zero); what cannot use it refuses it, naming the setting.
TEST(TrainMoe, TheExpertBiasSeesTheOneRanksLossesAndTravelsInCheckpoints) {
  const std::vector<std::string> bias{"--expert-bias-rate", "0.05"};
  const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "expert=2"},
      {"--mesh", "model=2,expert=2", "--sequence-parallel"},
      {"--mesh", "fsdp=2", "--zero", "3", "--recompute", "full"},
      {"--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "2"}};
  for (const char* file : {"mixtral_micro.json", "qwen3_moe_micro.json"}) {
    const double worst = testing::expect_layouts_see_one_rank(file, layouts, bias, 1e-5);
    std::cout << file << " with an expert bias: worst relative deviation " << worst << "\n";
    const auto with = testing::losses_of(run_command(train_ten_steps(file, bias)), file);
    const auto without = testing::losses_of(run_command(train_ten_steps(file, {})), file);
    ASSERT_EQ(with.size(), 10U);
    ASSERT_EQ(without.size(), 10U);
    EXPECT_GT(std::abs(with[9] - without[9]), 1e-4) << file;  // measured 4e-4 and more
  }
  const std::string folder = ::testing::TempDir() + "moe_bias_checkpoint";
  std::filesystem::remove_all(folder);
  std::vector<std::string> saving = train_ten_steps("mixtral_micro.json", bias);
  saving.insert(saving.end(), {"--mesh", "data=2,expert=2", "--save", folder, "--save-every", "5"});
  const std::vector<double> losses =
      testing::losses_of(run_command(saving), "the saving run with an expert bias");
  ASSERT_EQ(losses.size(), 10U);
  const std::string step5 = folder + "/step-00000005";
  for (const std::vector<std::string>& layout : std::vector<std::vector<std::string>>{
           {"--mesh", "data=1"}, {"--mesh", "model=2,expert=2"}}) {
    std::vector<std::string> resuming = train_ten_steps("mixtral_micro.json", layout);
    resuming.insert(resuming.end(), bias.begin(), bias.end());
    resuming.insert(resuming.end(), {"--resume", step5});
    const std::vector<double> after = testing::losses_of(run_command(resuming), layout[1]);
    ASSERT_EQ(after.size(), 5U) << layout[1];
    for (std::size_t s = 0; s < 5; ++s) {
      EXPECT_NEAR(after[s], losses[5 + s], 1e-5 * losses[5 + s]) << layout[1] << " step " << 6 + s;
    }
  }
  // A run without the bias would route otherwise: refused, as are the readers of parameters.
  std::vector<std::string> unbiased = train_ten_steps("mixtral_micro.json", {});
  unbiased.insert(unbiased.end(), {"--resume", step5});
  expect_bad_input(unbiased,
                   "holds an expert bias ('expert_bias/layers.0'), which chooses the "
                   "tokens' experts; this run keeps none");
  const testing::Result exported =
      run_command({"ckpt", "export", step5, "--format", "hf-mixtral", "--out", folder + "/hf"});
  EXPECT_NE(exported.status, 0);
  EXPECT_THAT(exported.err, ::testing::HasSubstr("holds an expert bias"));
  const testing::Result generated = run_command({"generate", step5, "--prompt", "hi"});
  EXPECT_NE(generated.status, 0);
  EXPECT_THAT(generated.err, ::testing::HasSubstr("holds an expert bias ('expert_bias/layers.0')"));
  expect_bad_input(train_ten_steps("gpt_micro.json", bias),
                   "--expert-bias-rate 0.050000 moves a Mixture of Experts' expert bias; --model "
                   "has no experts");
  for (const char* rate : {"-1", "nan", "inf", "1e7"}) {
    expect_bad_input(train_ten_steps("mixtral_micro.json", {"--expert-bias-rate", rate}),
                     "--expert-bias-rate");
  }
}

// Qwen3-MoE's dense layers among the routed ones (decoder_sparse_step 2: layers 1 and 3 route;
// mlp_only_layers [3]: layer 3 is dense too): every layout sees the one rank's losses, with the
// auxiliary loss over the routed layer and the expert bias; the layers are what the config says
// (a dense layer's gate_proj beside a routed layer's experts).
TEST(TrainMoe, DenseLayersAmongTheRoutedSeeTheOneRanksLosses) {
  const std::string file =
      small_qwen3_moe("moe_mixed.json", 4,
                      R"("norm_topk_prob": true, "decoder_sparse_step": 2, "mlp_only_layers": [3],
                      "output_router_logits": true, "router_aux_loss_coef": 0.5)");
  const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "expert=2"},
      {"--mesh", "model=2,expert=2", "--sequence-parallel"},
      {"--mesh", "fsdp=2,expert=2", "--zero", "3", "--recompute", "full"}};
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{}, {"--expert-bias-rate", "0.05"}}) {
    const double worst = testing::expect_layouts_see_one_rank(file, layouts, flags, 1e-5);
    std::cout << "dense layers among routed ones: worst relative deviation " << worst << "\n";
  }
  // Saved and resumed on a pipeline whose second stage holds no routed layer (and no bias): the
  // resumed run continues as the saving one did (a pipeline takes no auxiliary loss).
  const std::string staged = small_qwen3_moe("moe_mixed_staged.json", 4,
                                             R"("decoder_sparse_step": 2, "mlp_only_layers": [3])");
  const std::string folder = ::testing::TempDir() + "moe_mixed_checkpoint";
  std::filesystem::remove_all(folder);
  std::vector<std::string> pipelined{"--mesh", "pipeline=2", "--expert-bias-rate", "0.05"};
  std::vector<std::string> saving = train_ten_steps(staged, pipelined);
  saving.insert(saving.end(), {"--save", folder, "--save-every", "5"});
  const std::vector<double> losses = testing::losses_of(run_command(saving), "saving");
  pipelined.insert(pipelined.end(), {"--resume", folder + "/step-00000005"});
  const std::vector<double> after =
      testing::losses_of(run_command(train_ten_steps(staged, pipelined)), "resuming");
  ASSERT_EQ(losses.size(), 10U);
  ASSERT_EQ(after.size(), 5U);
  for (std::size_t s = 0; s < 5; ++s) EXPECT_NEAR(after[s], losses[5 + s], 1e-5 * losses[5 + s]);
  const testing::Result specs = run_command({"specs", "--model", file, "--mesh", "model=2"});
  ASSERT_EQ(specs.status, 0) << specs.err;
  for (const char* held :
       {"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
        "model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.down_proj.weight",
        "model.layers.3.mlp.up_proj.weight"}) {
    EXPECT_THAT(specs.out, ::testing::HasSubstr(held));
  }
  EXPECT_THAT(specs.out, ::testing::Not(::testing::HasSubstr("model.layers.3.mlp.gate.weight")));
}

// The presets train, and a Mixture of Experts' layer is not the dense one's: the experts and
// the router are parameters of their own, listed with their shapes.
TEST(TrainMoe, ThePresetsTrainWithTheirExperts) {
  for (const auto& [preset, experts] :
       {std::pair{"mixtral-tiny", "(8, 176, 128)"}, std::pair{"qwen3-moe-tiny", "(8, 176, 128)"}}) {
    const testing::Result r =
        run_command({"train", "--model", preset, "--steps", "3", "--batch", "4", "--seq", "16"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("mlp.experts.gate_up_proj"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(experts), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mlp.gate.weight"), std::string::npos) << r.out;
  }
}

TEST(TrainMoe, WhatIsNotComputedIsRefusedNamingIt) {
  // The experts folded over model x expert ranks that do not divide them: refused by the trainer
  // and the planner alike.
  expect_bad_input(train_ten_steps("mixtral_micro.json", {"--mesh", "model=4,expert=2"}),
                   "the expert degree 2 x the model degree 4 does not divide the 4 experts");
  expect_bad_input({"plan", "--model", "mixtral-tiny", "--devices", "16", "--seq", "64",
                    "--global-batch", "8", "--layout", "model=4,expert=4"},
                   "model x expert = 16 does not divide the 8 experts");
  // The planner proposes the model axis for a Mixture of Experts, each candidate's experts
  // dividing among its model x expert ranks.
  const testing::Result searched = run_command(
      {"plan", "--model", "mixtral-tiny", "--devices", "4", "--seq", "64", "--global-batch", "8",
       "--precision", "fp32", "--device", "cpu", "--top", "100", "--json"});
  ASSERT_EQ(searched.status, 0) << searched.err;
  bool proposed_model = false;
  const nlohmann::json candidates = nlohmann::json::parse(searched.out)["candidates"];
  ASSERT_FALSE(candidates.empty());
  for (const auto& candidate : candidates) {
    const int model = candidate["layout"]["model"], expert = candidate["layout"]["expert"];
    proposed_model = proposed_model || model > 1;
    EXPECT_EQ(8 % (model * expert), 0) << candidate["layout"];
  }
  EXPECT_TRUE(proposed_model);
  const auto refused = [&](const std::string& extra, const std::string& message) {
    expect_bad_input(train_ten_steps(small_qwen3_moe("moe_refused.json", 2, extra), {}), message);
  };
  refused(R"("decoder_sparse_step": 0)", "decoder_sparse_step");
  refused(R"("decoder_sparse_step": "two")", "decoder_sparse_step");
  refused(R"("decoder_sparse_step": 3)",
          "decoder_sparse_step 3 and mlp_only_layers leave none of the 2 layers routed");
  refused(R"("mlp_only_layers": [0, 1])", "leave none of the 2 layers routed");
  refused(R"("mlp_only_layers": [-1])", "mlp_only_layers");
  refused(R"("mlp_only_layers": "0")", "mlp_only_layers");
  refused(R"("router_aux_loss_coef": -1)", "router_aux_loss_coef");
  refused(R"("router_aux_loss_coef": "high")", "router_aux_loss_coef");
  refused(R"("router_aux_loss_coef": 1e400)", "number overflow parsing '1e400'");
  refused(R"("norm_topk_prob": true, "num_experts_per_tok": 5)", "num_experts_per_tok");
  refused(R"("norm_topk_prob": "yes")", "norm_topk_prob");
  const std::string file = ::testing::TempDir() + "moe_refused.json";
  std::ofstream(file) << R"({"family": "mixtral", "num_hidden_layers": 2, "hidden_size": 32,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
    "vocab_size": 256, "max_position_embeddings": 16, "num_local_experts": 4,
    "router_jitter_noise": 0.1})";
  expect_bad_input(train_ten_steps(file, {}), "router_jitter_noise");
}

}  // namespace
}  // namespace shardwise::cli
