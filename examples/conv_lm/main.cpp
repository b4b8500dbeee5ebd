// Trains the convolutional LM (conv_lm.hpp) through shardwise's training job on every layout
// the mission names, from the installed library's public headers alone, and checks each against
// the one-rank run: data=2,fsdp=2 at ZeRO 3, model=2 (tensor parallel), pipeline=2, and a run
// saved on one layout and resumed on another. Exits 1 where a layout's losses leave the
// one-rank run's.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <shardwise/comm/backend_registry.hpp>
#include <shardwise/core/error.hpp>
#include <shardwise/core/mesh.hpp>
#include <shardwise/train/training_job.hpp>

#include "conv_lm.hpp"

namespace {

using shardwise::Mesh;
using shardwise::train::JobSettings;
using shardwise::train::TrainingJob;

// Keeps rank 0's loss of every step.
class Losses final : public shardwise::train::JobObserver {
 public:
  void step(const shardwise::train::StepReport& report) override {
    losses[report.step] = report.loss;
  }
  void note(const std::string& text) override { std::cout << "  " << text << "\n"; }
  std::map<std::int64_t, float> losses;
};

std::map<std::int64_t, float> train(const std::string& mesh, int zero,
                                    const shardwise::train::CheckpointPolicy& checkpoints = {}) {
  JobSettings job;
  job.model = std::make_shared<conv_lm::ConvLmDefinition>(conv_lm::ConvLmConfig{});
  job.model_given = "conv-lm";
  job.mesh = Mesh::parse(mesh);
  job.training.steps = 6;
  job.training.batch = 8;
  job.training.warmup = 2;
  job.training.learning_rate = 1e-2F;
  job.training.zero = zero;
  job.threads = 1;
  job.checkpoints = checkpoints;
  const TrainingJob training(std::move(job));
  Losses losses;
  training.run(*shardwise::find_backend("local"), losses);
  return losses.losses;
}

// Whether `got`'s losses are the one-rank run's, step for step: ranks sum their gradients in
// another order than one rank does, so the floats may differ in their last bits.
bool matches(const std::string& what, const std::map<std::int64_t, float>& got,
             const std::map<std::int64_t, float>& one_rank) {
  bool same = !got.empty();
  for (const auto& [step, loss] : got) {
    const float expected = one_rank.at(step);
    const bool close = std::fabs(loss - expected) <= 1e-5F * std::fabs(expected);
    same = same && close;
    std::printf("  %-34s step %lld  loss %.6f  one rank %.6f%s\n", what.c_str(),
                static_cast<long long>(step), loss, expected, close ? "" : "  DIFFERS");
  }
  return same;
}

}  // namespace

int main() {
  try {
    const std::map<std::int64_t, float> one_rank = train("data=1", 0);
    std::printf("one rank: loss %.4f at step 1, %.4f at step 6\n", one_rank.at(1), one_rank.at(6));
    if (!(one_rank.at(6) < one_rank.at(1))) {
      std::printf("the one-rank run did not learn\n");
      return 1;
    }
    bool ok = true;
    ok = matches("data=2,fsdp=2, ZeRO 3", train("data=2,fsdp=2", 3), one_rank) && ok;
    ok = matches("model=2 (tensor parallel)", train("model=2", 0), one_rank) && ok;
    ok = matches("pipeline=2", train("pipeline=2", 0), one_rank) && ok;
    // Saved at step 3 on data=2,fsdp=2 at ZeRO 3, resumed on pipeline=2,model=2.
    const std::filesystem::path folder =
        std::filesystem::temp_directory_path() / ("conv_lm_" + std::to_string(::getpid()));
    std::filesystem::remove_all(folder);
    shardwise::train::CheckpointPolicy save;
    save.save = folder.string();
    save.save_every = 3;
    (void)train("data=2,fsdp=2", 3, save);
    shardwise::train::CheckpointPolicy resume;
    resume.resume = (folder / "step-00000003").string();
    const std::map<std::int64_t, float> resumed = train("pipeline=2,model=2", 1, resume);
    std::filesystem::remove_all(folder);
    ok = resumed.size() == 3 && resumed.begin()->first == 4 && ok;
    ok = matches("resumed on pipeline=2,model=2", resumed, one_rank) && ok;
    std::printf(ok ? "every layout matches the one-rank run\n" : "a layout differs\n");
    return ok ? 0 : 1;
  } catch (const shardwise::Error& e) {
    std::fprintf(stderr, "conv_lm: %s\n", e.what());
    return 2;
  }
}
