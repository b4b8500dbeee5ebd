// bf16 mixed precision as a user runs it (`shardwise train --precision bf16`): every family on
// every strategy and combination sees the one-rank bf16 run's losses within 1e-3 over 10 steps;
// bf16 computes something else than float32 (its products round) yet follows float32's curve;
// gradients reduced in bf16 too; and what cannot be read is refused naming the flag.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_command.hpp"
#include "shardwise/kernels/bf16_matmul.hpp"

namespace shardwise::cli {
namespace {

using testing::expect_bad_input;
using testing::json_lines;
using testing::losses_of;
using testing::run_command;
using testing::train_ten_steps;

// `precision`: the bf16 flags every run takes; within 1e-3 of one rank.
void expect_same_losses(const std::string& file,
                        const std::vector<std::vector<std::string>>& layouts, double* worst,
                        const std::vector<std::string>& precision = {"--precision", "bf16"}) {
  *worst = std::max(*worst, testing::expect_layouts_see_one_rank(file, layouts, precision, 1e-3));
}

const std::vector<std::vector<std::string>>& every_layout() {
  static const std::vector<std::vector<std::string>> layouts{
      {"--mesh", "data=2"},
      {"--mesh", "fsdp=2", "--zero", "1"},
      {"--mesh", "fsdp=2", "--zero", "2"},
      {"--mesh", "fsdp=2", "--zero", "3"},
      {"--mesh", "data=2,fsdp=2", "--zero", "3"},  // HSDP
      {"--mesh", "model=2"},
      {"--mesh", "model=2", "--sequence-parallel"},
      {"--mesh", "pipeline=2", "--schedule", "gpipe", "--microbatches", "4"},
      {"--mesh", "pipeline=2", "--schedule", "1f1b", "--microbatches", "4"},
      {"--mesh", "pipeline=2", "--schedule", "interleaved", "--microbatches", "2"},
      {"--mesh", "fsdp=2,model=2", "--zero", "3", "--recompute", "full"},
      {"--mesh", "data=2,fsdp=2,model=2,pipeline=2", "--zero", "3"}};
  return layouts;
}

TEST(TrainBf16, EveryLayoutOfEveryFamilySeesTheOneRanksLosses) {
  double worst = 0;
  // A GPT of 4 layers, so that the interleaved schedule has 2 virtual stages of 1 per rank.
  const std::string gpt = ::testing::TempDir() + "gpt_four_layers.json";
  std::ofstream(gpt) << R"({"n_layer": 4, "n_head": 2, "n_embd": 32, "block_size": 16,
    "vocab_size": 256})";
  for (const std::string& file :
       {gpt, std::string("llama_micro.json"), std::string("qwen2_micro.json"),
        std::string("qwen3_micro.json")}) {
    expect_same_losses(file, every_layout(), &worst);
  }
  // Replicated key/value heads (4 model ranks for 2 of them).
  expect_same_losses("llama_micro.json",
                     {{"--mesh", "model=4"}, {"--mesh", "fsdp=2,model=4", "--zero", "3"}}, &worst);
  std::cout << "worst relative deviation from one rank: " << worst << "\n";
}

// The residual stream kept in bf16 (each residual add rounded, its arrays in bf16, computed in
// the working layer and widened in backward): every layout sees the one rank's losses, with
// LayerNorm (GPT-2, whose add and norm are otherwise one pass) and RMSNorm with normed queries
// and keys (Qwen3).
TEST(TrainBf16, AResidualStreamInBf16SeesTheOneRanksLossesOnEveryLayout) {
  double worst = 0;
  const std::string gpt = ::testing::TempDir() + "gpt_four_layers_stream.json";
  std::ofstream(gpt) << R"({"n_layer": 4, "n_head": 2, "n_embd": 32, "block_size": 16,
    "vocab_size": 256})";
  for (const std::string& file : {gpt, std::string("qwen3_micro.json")}) {
    expect_same_losses(file, every_layout(), &worst,
                       {"--precision", "bf16", "--residual-dtype", "bf16"});
  }
  std::cout << "worst relative deviation from one rank: " << worst << "\n";
}

// The stream's rounding changes the computation, by little: its losses are not the float32
// stream's, and follow them.
TEST(TrainBf16, AResidualStreamInBf16RoundsAndFollowsTheFloat32Stream) {
  for (const char* file : {"gpt_micro.json", "llama_micro.json"}) {
    const std::vector<double> wide =
        losses_of(run_command(train_ten_steps(file, {"--precision", "bf16"})), file);
    const std::vector<double> narrow = losses_of(
        run_command(train_ten_steps(file, {"--precision", "bf16", "--residual-dtype", "bf16"})),
        file);
    ASSERT_EQ(narrow.size(), wide.size());
    double largest = 0;
    for (std::size_t s = 0; s < wide.size(); ++s) {
      EXPECT_NEAR(narrow[s], wide[s], 0.02 * wide[s]) << file << " step " << s + 1;
      largest = std::max(largest, std::abs(narrow[s] - wide[s]) / wide[s]);
    }
    EXPECT_GT(largest, 1e-6) << file << ": the bf16 stream gave the float32 stream's losses";
  }
}

// The run's config.json keeps the stream's type, and a run from it computes the same.
TEST(TrainBf16, AResidualStreamInBf16IsKeptInTheRunsConfig) {
  const std::string dir = ::testing::TempDir() + "bf16_stream_config/";
  std::filesystem::remove_all(dir);
  const testing::Result first = run_command(train_ten_steps(
      "gpt_micro.json", {"--precision", "bf16", "--residual-dtype", "bf16", "--log-dir", dir}));
  ASSERT_EQ(first.status, 0) << first.err;
  const auto config = nlohmann::json::parse(std::ifstream(dir + "config.json"));
  EXPECT_EQ(config["settings"]["residual_dtype"], "bf16");
  const testing::Result again = run_command({"train", "--config", dir + "config.json", "--json"});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(losses_of(again, "from config.json"), losses_of(first, "first"));
  std::filesystem::remove_all(dir);
}

// `ckpt loss` computes with the stream in bf16 as training did: another loss than the float32
// stream's, by little; under float32 precision the setting is refused naming the flag.
TEST(TrainBf16, CkptLossComputesWithTheResidualStreamInBf16) {
  const std::string dir = ::testing::TempDir() + "bf16_stream_loss/";
  std::filesystem::remove_all(dir);
  const testing::Result trained = run_command(train_ten_steps(
      "llama_micro.json", {"--precision", "bf16", "--residual-dtype", "bf16", "--save", dir}));
  ASSERT_EQ(trained.status, 0) << trained.err;
  const std::string data = ::testing::TempDir() + "bf16_stream_loss.txt";
  std::ofstream(data) << std::string(400, 'a') + "the quick brown fox jumps over the lazy dog";
  const auto loss = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"ckpt", "loss", dir, "--data", data, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const testing::Result r = run_command(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out)["loss"].get<double>() : 0.0;
  };
  const double wide = loss({"--precision", "bf16"});
  const double narrow = loss({"--precision", "bf16", "--residual-dtype", "bf16"});
  EXPECT_NE(narrow, wide);
  EXPECT_NEAR(narrow, wide, 1e-2 * wide);
  expect_bad_input({"ckpt", "loss", dir, "--data", data, "--residual-dtype", "bf16"},
                   "--residual-dtype is bf16 under --precision fp32");
  std::filesystem::remove_all(dir);
}

// bf16 is not float32 run again: its products round their operands, so its losses differ from
// float32's, by little.
TEST(TrainBf16, RoundsItsProductsAndFollowsFloat32) {
  for (const char* file : {"gpt_micro.json", "llama_micro.json"}) {
    const std::vector<double> fp32 = losses_of(run_command(train_ten_steps(file, {})), file);
    const std::vector<double> bf16 =
        losses_of(run_command(train_ten_steps(file, {"--precision", "bf16"})), file);
    ASSERT_EQ(bf16.size(), fp32.size());
    double largest = 0;
    for (std::size_t s = 0; s < fp32.size(); ++s) {
      EXPECT_NEAR(bf16[s], fp32[s], 0.02 * fp32[s]) << file << " step " << s + 1;
      largest = std::max(largest, std::abs(bf16[s] - fp32[s]) / fp32[s]);
    }
    EXPECT_GT(largest, 1e-6) << file << ": bf16 gave float32's losses";
  }
}

// The summary counts the computation's copies of the weights: every parameter's bf16 rounding
// on one rank (2 bytes each) and the norms' roundings widened to float32 (4 bytes each: the
// micro Llama's 2 x 4 layers' and its final norm's 32 weights), none in float32, and under
// ZeRO-3 only the gathered units' (each rank's, less than the whole model's).
TEST(TrainBf16, TheSummaryCountsTheWeightCopies) {
  const auto summary = [](const std::vector<std::string>& extra) {
    const testing::Result r = run_command(train_ten_steps("llama_micro.json", extra));
    EXPECT_EQ(r.status, 0) << r.err;
    return json_lines(r.out).back()["summary"];
  };
  const auto one = summary({"--precision", "bf16"});
  const auto parameters = one["parameters"].get<std::int64_t>();
  const std::int64_t norms = (2 * 4 + 1) * 32;
  EXPECT_EQ(one["ranks"][0]["compute_copies_peak_bytes"].get<std::int64_t>(),
            2 * parameters + 4 * norms);
  EXPECT_EQ(summary({})["ranks"][0]["compute_copies_peak_bytes"].get<std::int64_t>(), 0);
  const auto sharded = summary({"--mesh", "fsdp=2", "--zero", "3", "--precision", "bf16"});
  for (const auto& rank : sharded["ranks"]) {
    const auto copies = rank["compute_copies_peak_bytes"].get<std::int64_t>();
    EXPECT_GT(copies, 0);
    EXPECT_LT(copies, 2 * parameters);
  }
}

// Gradients reduced in bf16: each rank's gradient rounded, so the run differs from the float32
// reduction's, by little, on every strategy that reduces.
TEST(TrainBf16, GradientsReducedInBf16FollowTheFloat32Reduction) {
  const std::string file = "llama_micro.json";
  for (const std::vector<std::string>& layout :
       std::vector<std::vector<std::string>>{{"--mesh", "data=2"},
                                             {"--mesh", "fsdp=2", "--zero", "2"},
                                             {"--mesh", "fsdp=2", "--zero", "3"},
                                             {"--mesh", "data=2,fsdp=2", "--zero", "3"}}) {
    std::string where = file + " ";
    for (const std::string& flag : layout) where += flag + " ";
    std::vector<std::string> f32 = layout;
    f32.insert(f32.end(), {"--precision", "bf16"});
    std::vector<std::string> b16 = f32;
    b16.insert(b16.end(), {"--reduce-dtype", "bf16"});
    const std::vector<double> a = losses_of(run_command(train_ten_steps(file, f32)), where);
    const std::vector<double> b = losses_of(run_command(train_ten_steps(file, b16)), where);
    ASSERT_EQ(a.size(), b.size()) << where;
    double largest = 0;
    for (std::size_t s = 0; s < a.size(); ++s) {
      EXPECT_NEAR(b[s], a[s], 0.01 * a[s]) << where << "step " << s + 1;
      largest = std::max(largest, std::abs(b[s] - a[s]));
    }
    EXPECT_GT(largest, 0.0) << where << ": the bf16 reduction changed nothing";
  }
}

// Without bf16 units (a CPU with AVX2 only, or the units turned off as here) bf16 runs on the
// widened roundings: the losses of the units' run but for the order of the sums, and one note
// that says so. The units are turned on for their run, so that a CPU whose units are slower than
// its float32 FMAs (and left off by default) runs them too.
TEST(TrainBf16, WithoutBf16UnitsItRunsEmulatedAndSaysSo) {
  const std::vector<std::string> layout{"--mesh", "fsdp=2,model=2", "--zero",
                                        "3",      "--precision",    "bf16"};
  kernels::use_bf16_units(true);
  const testing::Result units = run_command(train_ten_steps("llama_micro.json", layout));
  kernels::use_bf16_units(false);
  const testing::Result emulated = run_command(train_ten_steps("llama_micro.json", layout));
  kernels::use_bf16_units(std::nullopt);
  const std::vector<double> a = losses_of(units, "units");
  const std::vector<double> b = losses_of(emulated, "emulated");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t s = 0; s < a.size(); ++s) EXPECT_NEAR(b[s], a[s], 1e-4 * a[s]) << s + 1;
  // What a person reads (the notes are not among the JSON lines).
  std::vector<std::string> words = train_ten_steps("llama_micro.json", layout);
  words.erase(std::find(words.begin(), words.end(), "--json"));
  kernels::use_bf16_units(true);
  const testing::Result a_run = run_command(words);
  kernels::use_bf16_units(false);
  const testing::Result b_run = run_command(words);
  kernels::use_bf16_units(std::nullopt);
  const testing::Result default_run = run_command(words);
  const std::string with_units = a_run.out + a_run.err, without = b_run.out + b_run.err;
  // The plan says what the run computes in.
  EXPECT_NE(with_units.find("precision: bf16 mixed (float32 weights, gradients and optimizer "
                            "state; the matrix products on bf16 copies)\n"),
            std::string::npos)
      << with_units;
  const std::string note = "bf16 is emulated";
  EXPECT_NE(without.find(note), std::string::npos) << without;
  EXPECT_EQ(without.find(note), without.rfind(note)) << "said more than once";
  if (kernels::bf16_units()) {
    EXPECT_EQ(with_units.find(note), std::string::npos) << with_units;
  }
  // By default the units run where they are faster; where they are slower, the run says it
  // widens, once.
  const std::string by_default = default_run.out + default_run.err;
  const std::string widened = "bf16 products run widened to float32";
  if (kernels::bf16_units_faster() || !kernels::bf16_units()) {
    EXPECT_EQ(by_default.find(widened), std::string::npos) << by_default;
  } else {
    EXPECT_NE(by_default.find(widened), std::string::npos) << by_default;
    EXPECT_EQ(by_default.find(widened), by_default.rfind(widened)) << "said more than once";
  }
}

// An AVX2-only CPU as oneDNN sees it: DNNL_MAX_CPU_ISA=AVX2, which oneDNN reads once a process,
// so the built command runs in a process of its own. bf16 trains there emulated, says once that
// this CPU has no bf16 units, and computes the losses the units compute (within the float32
// products' order of summation).
TEST(TrainBf16, OnAnAvx2OnlyCpuItRunsEmulatedAndSaysWhy) {
  const std::vector<std::string> layout{"--mesh", "data=2", "--precision", "bf16"};
  const auto on_avx2 = [](const std::vector<std::string>& words) {
    std::string line = std::string("DNNL_MAX_CPU_ISA=AVX2 '") + SHARDWISE_COMMAND_PATH + "'";
    for (const std::string& word : words) line += " '" + word + "'";
    line += " 2>&1";
    std::string output;
    FILE* pipe = popen(line.c_str(), "r");
    if (pipe == nullptr) return std::string("popen failed: ") + line;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
      output.append(buffer, n);
    }
    EXPECT_EQ(pclose(pipe), 0) << output;
    return output;
  };
  std::vector<std::string> words = train_ten_steps("llama_micro.json", layout);
  const std::vector<double> units = losses_of(run_command(words), "units");
  std::vector<double> emulated;
  const std::string json = on_avx2(words);
  std::istringstream lines(json);
  for (std::string text; std::getline(lines, text);) {
    if (!text.starts_with('{')) continue;
    const nlohmann::json line = nlohmann::json::parse(text);
    if (line.contains("loss")) emulated.push_back(line["loss"].get<double>());
  }
  ASSERT_EQ(emulated.size(), units.size()) << json;
  for (std::size_t s = 0; s < units.size(); ++s) {
    EXPECT_NEAR(emulated[s], units[s], 1e-4 * units[s]) << s + 1;
  }
  // What a person reads (the notes are not among the JSON lines).
  words.erase(std::find(words.begin(), words.end(), "--json"));
  const std::string text = on_avx2(words);
  const std::string note = "bf16 is emulated: this CPU has no bf16 units";
  EXPECT_NE(text.find(note), std::string::npos) << text;
  EXPECT_EQ(text.find(note), text.rfind(note)) << "said more than once";
}

// On real text (the main job's corpus, the license texts every Debian machine has), bf16's curve
// is float32's: `llama-tiny` over 2,000 steps, the training loss's mean over each 250 steps within
// 2% of float32's, with the residual stream in float32 and in bf16 (docs/precision.md has the
// numbers, and `small`'s).
TEST(TrainBf16, FollowsFloat32sCurveOverTwoThousandSteps) {
  const std::filesystem::path licenses = "/usr/share/common-licenses";
  if (!std::filesystem::is_directory(licenses)) GTEST_SKIP() << "no " << licenses;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(licenses)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  const std::string corpus = ::testing::TempDir() + "bf16_curve_licenses.txt";
  {
    std::ofstream out(corpus, std::ios::binary);
    for (const auto& file : files) out << std::ifstream(file, std::ios::binary).rdbuf();
  }
  const auto losses = [&](const char* precision, const char* stream) {
    // One thread: the suite runs two tests at a time on two cores, and a second thread waiting
    // at every kernel's barrier for a busy core made this run six times slower.
    return losses_of(run_command({"train", "--model", "llama-tiny", "--data", corpus, "--steps",
                                  "2000", "--json", "--precision", precision, "--residual-dtype",
                                  stream, "--threads", "1"}),
                     std::string(precision) + ", residual stream " + stream);
  };
  const std::vector<double> fp32 = losses("fp32", "fp32");
  ASSERT_EQ(fp32.size(), 2000U);
  // bf16, with the residual stream in float32 and in bf16.
  for (const char* stream : {"fp32", "bf16"}) {
    SCOPED_TRACE(std::string("residual stream ") + stream);
    const std::vector<double> bf16 = losses("bf16", stream);
    ASSERT_EQ(bf16.size(), 2000U);
    constexpr std::size_t kWindow = 250;
    for (std::size_t first = 0; first < fp32.size(); first += kWindow) {
      double a = 0, b = 0;
      for (std::size_t s = first; s < first + kWindow; ++s) {
        a += fp32[s];
        b += bf16[s];
      }
      EXPECT_NEAR(b, a, 0.02 * a) << "steps " << first + 1 << " to " << first + kWindow;
    }
    // And it learned: the last window's mean well below the first's.
    EXPECT_LT(bf16.back(), 0.6 * bf16.front());
  }
  std::filesystem::remove(corpus);
}

TEST(TrainBf16, BadPrecisionsAreNamed) {
  expect_bad_input(train_ten_steps("gpt_micro.json", {"--precision", "fp16"}),
                   "--precision is 'fp16'; expected fp32 or bf16");
  expect_bad_input(train_ten_steps("gpt_micro.json", {"--reduce-dtype", "int8"}),
                   "--reduce-dtype is 'int8'; expected fp32 or bf16");
  expect_bad_input(train_ten_steps("gpt_micro.json", {"--residual-dtype", "fp16"}),
                   "--residual-dtype is 'fp16'; expected fp32 or bf16");
  // A bf16 stream is part of bf16 precision; under float32 it would be a silent rounding.
  expect_bad_input(train_ten_steps("gpt_micro.json", {"--residual-dtype", "bf16"}),
                   "--residual-dtype is bf16 under --precision fp32");
}

}  // namespace
}  // namespace shardwise::cli
