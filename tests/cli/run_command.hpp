#pragma once
// Runs the `shardwise` command in-process and captures what it prints.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

namespace shardwise::cli::testing {

struct Result {
  int status;
  std::string out;
  std::string err;
};

inline Result run_command(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int status = run(args, out, err);
  return {status, out.str(), err.str()};
}

// Bad input: status 2, nothing on stdout, one line on stderr that contains `message`.
inline void expect_bad_input(const std::vector<std::string>& args, const std::string& message) {
  const Result r = run_command(args);
  EXPECT_EQ(r.status, 2) << message;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, ::testing::HasSubstr(message));
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// One JSON value per line of `text` (the command's --json output).
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// A file of the source tree, e.g. "examples/models/gpt2.json".
inline std::string source_path(const std::string& relative) {
  return std::string(SHARDWISE_SOURCE_DIR) + "/" + relative;
}

// `shardwise train` of a small model (a file of examples/models, or a path) for 10 steps of 12
// sequences of 12 tokens, seed 5, learning rate 3e-3, --json, then `extra`: the runs the layout
// tests hold to one rank's.
inline std::vector<std::string> train_ten_steps(const std::string& file,
                                                const std::vector<std::string>& extra) {
  const std::string path = file.starts_with('/') ? file : source_path("examples/models/" + file);
  std::vector<std::string> args{"train",   "--model", path,    "--steps", "10",
                                "--batch", "12",      "--seq", "12",      "--seed",
                                "5",       "--lr",    "3e-3",  "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Each step's loss (or another field of its line) of a --json run (a failure naming `where`
// where the run failed).
inline std::vector<double> losses_of(const Result& r, const std::string& where,
                                     const char* field = "loss") {
  EXPECT_EQ(r.status, 0) << where << r.err;
  std::vector<double> losses;
  for (const nlohmann::json& line : json_lines(r.out)) {
    if (line.contains(field)) losses.push_back(line[field].get<double>());
  }
  return losses;
}

// Each of `layouts` (flags after train_ten_steps', each with `flags` too) sees the one rank's
// losses and gradient norms within `tolerance` relative, step by step, and the one rank learns (a
// run whose gradients were lost would stay near ln(vocabulary); one whose gradients were scaled
// wrong may see nearly AdamW's losses, not its norms). Returns the largest relative deviation.
inline double expect_layouts_see_one_rank(const std::string& file,
                                          const std::vector<std::vector<std::string>>& layouts,
                                          const std::vector<std::string>& flags, double tolerance) {
  const Result one_run = run_command(train_ten_steps(file, flags));
  const std::vector<double> one = losses_of(one_run, file);
  const std::vector<double> one_norms = losses_of(one_run, file, "grad_norm");
  EXPECT_EQ(one.size(), 10U) << file;
  if (one.size() != 10U) return 1;
  EXPECT_LT(one[9], one[0] - 0.4) << file;
  double worst = 0;
  for (std::vector<std::string> layout : layouts) {
    std::string where = file + " ";
    for (const std::string& flag : layout) where += flag + " ";
    layout.insert(layout.end(), flags.begin(), flags.end());
    const Result run = run_command(train_ten_steps(file, layout));
    const std::vector<double> many = losses_of(run, where);
    const std::vector<double> norms = losses_of(run, where, "grad_norm");
    EXPECT_EQ(many.size(), one.size()) << where;
    EXPECT_EQ(norms.size(), one_norms.size()) << where;
    for (std::size_t s = 0; s < std::min(one.size(), many.size()); ++s) {
      EXPECT_NEAR(many[s], one[s], tolerance * one[s]) << where << "step " << s + 1;
      worst = std::max(worst, std::abs(many[s] - one[s]) / one[s]);
    }
    for (std::size_t s = 0; s < std::min(one_norms.size(), norms.size()); ++s) {
      EXPECT_NEAR(norms[s], one_norms[s], 10 * tolerance * one_norms[s])
          << where << "gradient norm, step " << s + 1;
    }
  }
  return worst;
}

}  // namespace shardwise::cli::testing
