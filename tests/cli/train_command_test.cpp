// `shardwise train` as a user runs it: the JSON lines and the summary, the same losses on every
// mesh, and one clear line for bad input.
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mkl_for_tests.hpp"
#include "run_command.hpp"
#include "shardwise/kernels/blas_library.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/parameter_shardings.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using ::testing::HasSubstr;
using testing::json_lines;
using testing::run_command;
using testing::source_path;

std::vector<std::string> micro(std::vector<std::string> extra) {
  std::vector<std::string> args{"train",   "--model", source_path("examples/models/gpt_micro.json"),
                                "--steps", "6",       "--batch",
                                "4",       "--seed",  "3",
                                "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(TrainCommand, JsonLinesThenASummaryCountedFromTheBuffers) {
  const testing::Result r =
      run_command(micro({"--mesh", "data=2", "--zero", "1", "--eval-every", "3"}));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 7U);
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(lines[static_cast<std::size_t>(s)]["step"], s + 1);
    EXPECT_GT(lines[static_cast<std::size_t>(s)]["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_TRUE(lines[2].contains("val_loss"));
  EXPECT_FALSE(lines[3].contains("val_loss"));
  const auto& summary = lines[6]["summary"];
  EXPECT_EQ(summary["ranks"].size(), 2U);
  // ZeRO-1 on 2 ranks: each keeps half of every parameter's optimizer state (Adam's two
  // moments), as every dimension 0 of the micro model is even.
  const auto parameters = summary["parameters"].get<std::int64_t>();
  const auto optimizer = summary["ranks"][0]["optimizer_bytes"].get<std::int64_t>();
  EXPECT_EQ(2 * optimizer, 2 * 4 * parameters);
  EXPECT_GT(summary["comm_bytes_per_step"]["data"].get<std::int64_t>(), 0);
}

// ZeRO-3 on 4 ranks: parameters, gradients and optimizer state exactly a quarter of one rank's
// each (every dimension 0 of the micro model divides by 4), and gathered units reported.
TEST(TrainCommand, ZeroThreeReportsAQuarterOfTheState) {
  const auto one = json_lines(run_command(micro({})).out).back()["summary"];
  const testing::Result r = run_command(micro({"--mesh", "fsdp=4", "--zero", "3"}));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto summary = json_lines(r.out).back()["summary"];
  ASSERT_EQ(summary["ranks"].size(), 4U);
  const auto whole = one["ranks"][0];
  for (const auto& rank : summary["ranks"]) {
    for (const char* field : {"params_bytes", "grads_bytes", "optimizer_bytes"}) {
      const auto quarter = rank[field].get<std::int64_t>();
      const auto all = whole[field].get<std::int64_t>();
      EXPECT_EQ(4 * quarter, all) << field;
    }
    EXPECT_GT(rank["gathered_peak_bytes"].get<std::int64_t>(), 0);
  }
  EXPECT_EQ(whole["gathered_peak_bytes"].get<std::int64_t>(), 0);
}

// Bytes per step count the training steps only: validation passes move bytes too (their loss
// averages, ZeRO-3's gathers) and must not change them.
TEST(TrainCommand, BytesPerStepLeaveValidationOut) {
  for (const char* zero : {"1", "3"}) {
    const auto plain = json_lines(run_command(micro({"--mesh", "fsdp=2", "--zero", zero})).out);
    const auto evaluated = json_lines(
        run_command(micro({"--mesh", "fsdp=2", "--zero", zero, "--eval-every", "2"})).out);
    const auto& bytes = plain.back()["summary"]["comm_bytes_per_step"];
    EXPECT_GT(bytes["fsdp"].get<std::int64_t>(), 0) << zero;
    EXPECT_EQ(evaluated.back()["summary"]["comm_bytes_per_step"], bytes) << zero;
  }
}

TEST(TrainCommand, EveryMeshSeesTheSameLossesAsOneRank) {
  const auto one = json_lines(run_command(micro({})).out);
  for (const std::vector<std::string>& mesh :
       {std::vector<std::string>{"--mesh", "data=2"},
        std::vector<std::string>{"--mesh", "data=2,fsdp=2", "--zero", "2"},
        std::vector<std::string>{"--mesh", "fsdp=4", "--zero", "1"},
        std::vector<std::string>{"--mesh", "fsdp=4", "--zero", "3"},
        std::vector<std::string>{"--mesh", "data=2,fsdp=2", "--zero", "3"}}) {
    const auto many = json_lines(run_command(micro(mesh)).out);
    ASSERT_EQ(many.size(), one.size()) << mesh[1];
    for (std::size_t s = 0; s + 1 < one.size(); ++s) {
      const double a = one[s]["loss"].get<double>();
      const double b = many[s]["loss"].get<double>();
      EXPECT_NEAR(b, a, 1e-5 * a) << mesh[1] << " step " << s + 1;
    }
  }
}

// --blas mkl: the same losses as oneDNN's on one rank and on a ZeRO-3 mesh whose ranks are
// threads, the summary naming the library, and the caller's library selected again afterwards.
TEST(TrainCommand, MklGivesOneDnnsLosses) {
  const std::string mkl = shardwise::testing::mkl_for_tests();
  if (mkl.empty()) GTEST_SKIP() << "no libmkl_rt on this machine (tests/mkl_for_tests.hpp)";
  const auto one = json_lines(run_command(micro({})).out);
  EXPECT_THAT(one.back()["summary"]["blas"].get<std::string>(), ::testing::StartsWith("oneDNN "));
  for (const std::vector<std::string>& mesh :
       {std::vector<std::string>{}, std::vector<std::string>{"--mesh", "fsdp=2", "--zero", "3"}}) {
    std::vector<std::string> flags{"--blas", "mkl:" + mkl};
    flags.insert(flags.end(), mesh.begin(), mesh.end());
    const testing::Result r = run_command(micro(flags));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), one.size());
    EXPECT_THAT(lines.back()["summary"]["blas"].get<std::string>(), ::testing::StartsWith("MKL "));
    for (std::size_t s = 0; s + 1 < one.size(); ++s) {
      const double a = one[s]["loss"].get<double>();
      EXPECT_NEAR(lines[s]["loss"].get<double>(), a, 1e-5 * a) << "step " << s + 1;
    }
    EXPECT_EQ(kernels::blas_setting(), "onednn");
  }
}

// A pipeline axis: every schedule, with data parallelism and ZeRO, gives the one-rank losses;
// the summary names each rank's stage, the bubble and each stage's peak activations.
TEST(TrainCommand, PipelineLayoutsSeeTheSameLossesAsOneRank) {
  const auto one = json_lines(run_command(micro({})).out);
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"--mesh", "pipeline=2"},
        std::vector<std::string>{"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches",
                                 "4"},
        std::vector<std::string>{"--mesh", "data=2,pipeline=2", "--zero", "1"},
        std::vector<std::string>{"--mesh", "fsdp=2,pipeline=2", "--zero", "3", "--stages-by",
                                 "cost"},
        std::vector<std::string>{"--mesh", "pipeline=2,model=2", "--zero", "0"}}) {
    const testing::Result r = run_command(micro(layout));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto many = json_lines(r.out);
    ASSERT_EQ(many.size(), one.size()) << layout[1];
    for (std::size_t s = 0; s + 1 < one.size(); ++s) {
      const double a = one[s]["loss"].get<double>();
      EXPECT_NEAR(many[s]["loss"].get<double>(), a, 2e-5 * a) << layout[1] << " step " << s + 1;
    }
    const auto& summary = many.back()["summary"];
    EXPECT_EQ(summary["parameters"], one.back()["summary"]["parameters"]);
    const auto& pipeline = summary["pipeline"];
    EXPECT_EQ(pipeline["peak_activation_bytes_per_stage"].size(), 2U);
    EXPECT_GT(pipeline["bubble_fraction"].get<double>(), 0);
    EXPECT_GT(summary["comm_bytes_per_step"]["pipeline"].get<std::int64_t>(), 0);
    std::set<int> stages;
    for (const auto& rank : summary["ranks"]) stages.insert(rank["stage"].get<int>());
    EXPECT_EQ(stages, (std::set<int>{0, 1})) << layout[1];
  }
  // The plan names each stage's layers.
  const testing::Result text =
      run_command({"train", "--model", source_path("examples/models/gpt_micro.json"), "--steps",
                   "1", "--mesh", "pipeline=2", "--microbatches", "2"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out,
              HasSubstr("pipeline: 2 stages, 1f1b, 2 micro-batches of 4 sequences "
                        "(published bubble 0.500)\n  stage 0 (rank 0): the embeddings, layer 0\n"
                        "  stage 1 (rank 1): layer 1, the final norm and the head\n"));
  EXPECT_THAT(text.out, HasSubstr("pipeline, last step: bubble "));
}

// Layers that do not split evenly among the stages train, by count and by cost, with the one
// rank's losses: the memory check plans the stages the trainer runs instead of refusing them.
TEST(TrainCommand, UnevenPipelineStagesTrain) {
  for (const int layers : {5, 7}) {
    const std::string model = ::testing::TempDir() + "uneven_" + std::to_string(layers) + ".json";
    std::ofstream(model) << R"({"n_layer": )" << layers
                         << R"(, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256})";
    const std::vector<std::string> base{"train", "--model", model, "--steps",
                                        "2",     "--batch", "4",   "--json"};
    const auto one = json_lines(run_command(base).out);
    ASSERT_EQ(one.size(), 3U) << layers;
    for (const char* by : {"count", "cost"}) {
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--mesh", "pipeline=2", "--stages-by", by});
      const testing::Result r = run_command(args);
      ASSERT_EQ(r.status, 0) << layers << " layers by " << by << ": " << r.err;
      const auto many = json_lines(r.out);
      ASSERT_EQ(many.size(), 3U);
      for (std::size_t s = 0; s < 2; ++s) {
        const double a = one[s]["loss"].get<double>();
        EXPECT_NEAR(many[s]["loss"].get<double>(), a, 2e-5 * a) << layers << " by " << by;
      }
      const auto& split = many.back()["summary"]["pipeline"]["layers"];
      EXPECT_EQ(split[0].get<int>() + split[1].get<int>(), layers);
      EXPECT_NE(split[0].get<int>(), split[1].get<int>());
    }
  }
}

// --recompute: full recomputation runs each layer's forward again in backward, so every layout
// gives exactly the losses it gives without (the same operations on the same values), keeping
// less; selective keeps what none keeps (attention never keeps its weights).
TEST(TrainCommand, RecomputationGivesTheSameLossesAndKeepsLess) {
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{}, std::vector<std::string>{"--mesh", "fsdp=2", "--zero", "3"},
        std::vector<std::string>{"--mesh", "model=2", "--sequence-parallel"},
        std::vector<std::string>{"--mesh", "data=2,pipeline=2", "--zero", "1"},
        std::vector<std::string>{"--mesh", "pipeline=2,model=2", "--microbatches", "2"}}) {
    std::map<std::string, std::vector<nlohmann::json>> runs;
    for (const char* mode : {"none", "selective", "full"}) {
      std::vector<std::string> args = layout;
      args.insert(args.end(), {"--recompute", mode});
      const testing::Result r = run_command(micro(args));
      ASSERT_EQ(r.status, 0) << r.err;
      runs[mode] = json_lines(r.out);
    }
    const std::string where = layout.empty() ? "one rank" : layout[1];
    for (std::size_t s = 0; s + 1 < runs["none"].size(); ++s) {
      EXPECT_EQ(runs["full"][s]["loss"], runs["none"][s]["loss"]) << where << " step " << s + 1;
      EXPECT_EQ(runs["selective"][s]["loss"], runs["none"][s]["loss"]) << where;
    }
    const auto activations = [&](const char* mode) {
      return runs[mode].back()["summary"]["ranks"][0]["activations_peak_bytes"].get<std::int64_t>();
    };
    EXPECT_LT(activations("full"), activations("none")) << where;
    EXPECT_EQ(activations("selective"), activations("none")) << where;
  }
  expect_bad_input(micro({"--recompute", "some"}),
                   "--recompute is 'some'; expected none, selective or full");
}

// --param-sharding: FSDP's rules on the model's logical axes, and a rules file, give other
// blocks (norms replicated); the losses stay the one-rank run's and each rank keeps exactly the
// bytes of its shard shapes.
TEST(TrainCommand, ParameterShardingsFromTheStrategyOrARulesFile) {
  const auto one = json_lines(run_command(micro({})).out);
  const std::string rules = ::testing::TempDir() + "train_rules.json";
  std::ofstream(rules) << R"({"logical_axis_rules": [["embed", "fsdp"], ["mlp", "fsdp"]]})";
  const std::vector<train::ParameterSpec> specs =
      models::gpt_parameters(models::GptConfig{2, 2, 32, 16, 256});
  const FSDPStrategy fsdp("fsdp", std::nullopt, 1);
  const auto by_axes =
      4 *
      train::fsdp_shardings(specs, fsdp, 2, train::FsdpSplit::kLogicalAxes).shard_elements(specs);
  const LogicalAxisRules file_rules(
      {LogicalAxisRule{"embed", {"fsdp"}}, LogicalAxisRule{"mlp", {"fsdp"}}});
  const auto by_file = 4 * train::rules_shardings(specs, Mesh({"data", "fsdp"}, {2, 2}), "fsdp",
                                                  file_rules, ParameterNameRules({}))
                               .shard_elements(specs);
  const auto whole = one.back()["summary"]["ranks"][0]["params_bytes"].get<std::int64_t>();
  EXPECT_GT(2 * by_axes, whole);
  EXPECT_LT(by_file, by_axes);
  for (const auto& [flags, expected] :
       std::vector<std::pair<std::vector<std::string>, std::int64_t>>{
           {{"--mesh", "fsdp=2", "--zero", "3", "--param-sharding", "logical-axes"}, by_axes},
           {{"--mesh", "data=2,fsdp=2", "--zero", "3", "--param-sharding", rules}, by_file},
           {{"--mesh", "fsdp=2", "--zero", "2", "--param-sharding", "logical-axes"}, by_axes}}) {
    const testing::Result r = run_command(micro(flags));
    ASSERT_EQ(r.status, 0) << r.err;
    const auto many = json_lines(r.out);
    ASSERT_EQ(many.size(), one.size());
    for (std::size_t s = 0; s + 1 < one.size(); ++s) {
      const double a = one[s]["loss"].get<double>();
      EXPECT_NEAR(many[s]["loss"].get<double>(), a, 1e-5 * a) << flags[1] << " step " << s + 1;
    }
    for (const auto& rank : many.back()["summary"]["ranks"]) {
      EXPECT_EQ(rank["optimizer_bytes"].get<std::int64_t>(), 2 * expected) << flags[1];
      if (flags[3] == "3") {
        EXPECT_EQ(rank["params_bytes"].get<std::int64_t>(), expected);
      }
    }
  }
}

TEST(TrainCommand, BadInput) {
  expect_bad_input({"train", "--model", "huge"}, "--model: 'huge' is neither a model");
  expect_bad_input({"train", "--zero", "5"}, "--zero is 5; expected 0 to 3");
  expect_bad_input({"train", "--mesh", "context=2"},
                   "--mesh: axis 'context' is context parallelism (every activation split along "
                   "the sequence, attention across the ranks), which the training layer does not "
                   "run yet (it runs data, fsdp, model, pipeline, expert)");
  expect_bad_input({"train", "--mesh", "expert=2"},
                   "--mesh Mesh('expert': 2): an expert axis of 2 ranks: the model has no experts "
                   "to split");
  expect_bad_input({"train", "--model", "mixtral-tiny", "--mesh", "expert=3", "--batch", "6"},
                   "the expert degree 3 does not divide the 8 experts of parameter "
                   "'model.layers.0.mlp.experts.gate_up_proj'");
  expect_bad_input({"train", "--mesh", "tensor=2"},
                   "--mesh: axis 'tensor' is not one the training layer knows (data, fsdp, "
                   "model, pipeline, expert)");
  expect_bad_input({"train", "--mesh", "model=3"},
                   "the model degree 3 does not divide the 4 attention heads (n_head)");
  expect_bad_input({"train", "--mesh", "data=2", "--sequence-parallel"},
                   "--sequence-parallel splits the sequence over the model axis; --mesh "
                   "Mesh('data': 2) has none");
  expect_bad_input({"train", "--mesh", "model=2", "--sequence-parallel", "--seq", "63"},
                   "--sequence-parallel: --seq 63 does not divide among the 2 model ranks");
  expect_bad_input({"train", "--mesh", "data=3", "--batch", "8"},
                   "--batch 8 does not divide among the 3 data-parallel ranks");
  expect_bad_input({"train", "--lr", "nan"}, "--lr");
  expect_bad_input({"train", "--blas", "openblas"},
                   "--blas is 'openblas'; expected onednn, mkl or mkl:PATH");
  expect_bad_input({"train", "--blas", "mkl:/dev/zero"}, "--blas: /dev/zero is not a regular file");
  expect_bad_input({"train", "--steps", "0"}, "--steps is 0; expected 1 to 10000000");
  expect_bad_input({"train", "--schedule", "gpipe"},
                   "schedule the pipeline axis; --mesh Mesh('data': 1) has none");
  expect_bad_input({"train", "--mesh", "pipeline=2", "--schedule", "zigzag"},
                   "--schedule is 'zigzag'; expected gpipe, 1f1b or interleaved");
  expect_bad_input({"train", "--mesh", "pipeline=2", "--microbatches", "3"},
                   "--microbatches 3 does not divide the 8 sequences each data-parallel rank "
                   "takes per step (--batch 8 over 1)");
  // Without --microbatches the default is one that divides the sequences, never blamed on a
  // flag the user did not give: 3 stages on 8 sequences run 4 micro-batches.
  {
    const auto three =
        testing::run_command({"train", "--model", source_path("examples/models/gpt_micro.json"),
                              "--mesh", "pipeline=2", "--steps", "1", "--batch", "8"});
    ASSERT_EQ(three.status, 0) << three.err;
    const std::string odd = ::testing::TempDir() + "three_layers.json";
    std::ofstream(odd)
        << R"({"n_layer": 3, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256})";
    const auto run = testing::run_command(
        {"train", "--model", odd, "--mesh", "pipeline=3", "--steps", "1", "--batch", "8"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_THAT(run.out, ::testing::HasSubstr("3 stages, 1f1b, 4 micro-batches of 2 sequences"));
    expect_bad_input({"train", "--model", odd, "--mesh", "pipeline=3", "--batch", "2"},
                     "--mesh Mesh('pipeline': 3) runs at least one micro-batch per pipeline "
                     "stage (3), and no such count of at most");
  }
  expect_bad_input({"train", "--mesh", "pipeline=2", "--virtual-stages", "2"},
                   "--virtual-stages 2 needs --schedule interleaved");
  expect_bad_input({"train", "--mesh", "pipeline=2", "--stages-by", "speed"},
                   "--stages-by is 'speed'; expected count or cost");
  expect_bad_input({"train", "--mesh", "pipeline=4", "--schedule", "interleaved"},
                   "4 layers cannot fill 8 virtual stages");
  expect_bad_input(
      {"train", "--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "1"},
      "--schedule interleaved: ");
  expect_bad_input({"train", "--seq", "65"}, "--seq is 65; expected 1 to 64");
  expect_bad_input({"train", "--data", "/dev/zero"}, "--data '/dev/zero' is not a regular file");
  expect_bad_input({"train", "--model", "gpt2", "--batch", "65536"},
                   "--model gpt2 with --batch 65536 on 1 ranks needs about");
  expect_bad_input({"train", "--model", "/tmp"}, "--model '/tmp' is a directory, not a file");
  expect_bad_input({"train", "--model", "/dev/zero"}, "is not a regular file");
  expect_bad_input({"train", "--steps", "9223372036854775808"},
                   "expected an integer of at most 64 bits");
  expect_bad_input({"train", "--data", "/dev/null"}, "--data '/dev/null' is not a regular file");
  expect_bad_input({"train", "--data", source_path("examples/models/gpt_micro.json")},
                   "gpt_micro.json' has 79 tokens; sequences of 64 tokens need at least 650");
  expect_bad_input({"train", "--mesh", "Mesh('data': 2, devices=[5, 7])"},
                   "--mesh: Mesh('data': 2, devices=[5, 7]) names devices");
  expect_bad_input({"train", "--mesh", "data=two"}, "--mesh: ");
  const std::string zero_layers = ::testing::TempDir() + "zero_layers.json";
  std::ofstream(zero_layers)
      << R"({"n_layer": 0, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256})";
  expect_bad_input({"train", "--model", zero_layers},
                   "--model '" + zero_layers + "': n_layer is 0; expected 1 to 10000");
  const std::string huge_layers = ::testing::TempDir() + "huge_layers.json";
  std::ofstream(huge_layers) << R"({"n_layer": 18446744073709551616, "n_head": 2, "n_embd": 32,
                                    "block_size": 16, "vocab_size": 256})";
  expect_bad_input({"train", "--model", huge_layers},
                   "\"n_layer\" is 1.8446744073709552e+19; expected a positive integer");
  const std::string twice = ::testing::TempDir() + "twice.json";
  std::ofstream(twice) << R"({"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16,
                              "vocab_size": 256, "n_layer": 99})";
  expect_bad_input({"train", "--model", twice}, "has the key \"n_layer\" twice in one object");
  expect_bad_input({"train", "--data", "/nonexistent/file"},
                   "cannot read --data '/nonexistent/file'");
  expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", "rows"},
                   "--param-sharding: 'rows' is neither first-dim, logical-axes nor a readable "
                   "rules file");
  expect_bad_input({"train", "--param-sharding", "logical-axes"},
                   "--param-sharding logical-axes needs --zero 1, 2 or 3");
  expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", "/dev/zero"},
                   "--param-sharding '/dev/zero' is not a regular file");
  const std::string onto_data = ::testing::TempDir() + "onto_data.json";
  std::ofstream(onto_data) << R"({"logical_axis_rules": [["embed", "data"]]})";
  expect_bad_input(
      {"train", "--mesh", "data=2,fsdp=2", "--zero", "3", "--param-sharding", onto_data},
      "is split over 'data'; ZeRO splits parameters over 'fsdp' only");
  const std::string unknown = ::testing::TempDir() + "unknown_rules.json";
  std::ofstream(unknown) << R"({"axis_rules": []})";
  expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", unknown},
                   "unknown field 'axis_rules'");
}

// A rules file is read as `shardwise specs --rules` reads it, and what the trainer cannot use is
// an error, not ignored.
TEST(TrainCommand, ARulesFileIsReadWholeAndWhatCannotApplyIsRefused) {
  const auto rules = [](const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
  };
  const auto both = [](const std::string& path, const std::string& message) {
    expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", path},
                     message);
    expect_bad_input({"specs", "--model", "tiny", "--mesh", "fsdp=2", "--rules", path}, message);
  };
  both(rules("repeated_rule.json", R"({"logical_axis_rules": [["embed", "fsdp"], ["mlp", null],
                                         ["embed", "fsdp"]]})"),
       "logical axis rule 2 ('embed', ('fsdp')) repeats rule 0");
  both(rules("same_axis_twice.json", R"({"logical_axis_rules": [["embed", ["fsdp", "fsdp"]]]})"),
       "names mesh axis 'fsdp' twice");
  const std::string names = rules("name_rules.json", R"({"parameter_rules": [
      {"pattern": "wte", "logical_axes": ["vocab", "embed", "extra"]}]})");
  expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", names},
                   "parameter_rules give logical axes to parameters that declare none");
  const std::string stages = rules("stage_rules.json", R"({"stage_rules": {}})");
  expect_bad_input({"train", "--mesh", "fsdp=2", "--zero", "1", "--param-sharding", stages},
                   "stage_rules place parameters in pipeline stages");
  // A rules file that splits a dimension over the model axis that the GPT's layers do not.

  expect_bad_input({"train", "--mesh", "fsdp=2,model=2", "--zero", "1", "--param-sharding",
                    rules("embed_on_model.json", R"({"logical_axis_rules": [["embed", "model"],
                                                     ["heads", "model"]]})")},
                   "parameter 'transformer.wte.weight' would be split for good by P(None, "
                   "'model'); the model's layers split it by P('model')");
  // specs says the same of the name rules: not an error there (a manifest may need them), a note.
  const testing::Result shown =
      run_command({"specs", "--model", "tiny", "--mesh", "fsdp=2", "--rules", names});
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_THAT(shown.out, ::testing::HasSubstr("parameter_rules are not used: every parameter of "
                                              "the model declares its logical axes"));
}

}  // namespace
}  // namespace shardwise::cli
