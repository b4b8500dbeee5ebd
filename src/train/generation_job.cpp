#include "shardwise/train/generation_job.hpp"

#include <algorithm>
#include <mutex>

#include "shardwise/core/error.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/train/decoding_model.hpp"
#include "shardwise/train/parallel_context.hpp"
#include "shardwise/train/rank_runner.hpp"

namespace shardwise::train {

void GenerationJob::check_before_model(const GenerationSettings& settings) {
  const SettingNames& named = settings.names;
  const Mesh& mesh = settings.mesh;
  ParallelContext::validate(mesh, static_cast<int>(mesh.size()));
  DecodingModel::check_mesh(mesh, named);
  validate(settings.options.sampling, named);
  if (settings.threads < 0 || settings.threads > 256) {
    throw InvalidArgument(named("threads") + " is " + std::to_string(settings.threads) +
                          "; expected 0 (the default) to 256");
  }
}

GenerationJob::GenerationJob(GenerationSettings settings) : settings_(std::move(settings)) {
  const SettingNames& named = settings_.names;
  if (!settings_.model) throw InvalidArgument(named("model") + " is not given");
  check_before_model(settings_);
  const Mesh& mesh = settings_.mesh;
  const std::size_t vocab = settings_.model->vocab_size();
  for (const std::int32_t id : settings_.options.stop_tokens) {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) {
      throw InvalidArgument(named("stop_tokens") + ": the id " + std::to_string(id) +
                            " is outside the model's vocabulary 0.." + std::to_string(vocab - 1));
    }
  }
  // The split over the model axis, refused here rather than on every rank.
  const int degree = static_cast<int>(mesh.size());
  (void)settings_.model->model_placements(degree);
  (void)settings_.model->shared_rows(degree);
  threads_ = settings_.threads > 0 ? settings_.threads : (degree > 1 ? 1 : 0);
}

void GenerationJob::check_prompt(std::span<const std::int32_t> prompt) const {
  const std::size_t context = settings_.model->context_length();
  const std::size_t vocab = settings_.model->vocab_size();
  if (prompt.empty()) throw InvalidArgument("the prompt is empty: generation needs a token");
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= vocab) {
      throw InvalidArgument("the prompt's token " + std::to_string(i) + " is the id " +
                            std::to_string(prompt[i]) + ", outside the model's vocabulary 0.." +
                            std::to_string(vocab - 1));
    }
  }
  if (prompt.size() >= context) {
    throw InvalidArgument(
        "the prompt has " + std::string(prompt.size() > context ? "more than " : "") +
        std::to_string(std::min(prompt.size(), context)) + " tokens; the model's context of " +
        std::to_string(context) + " leaves no room for a new one");
  }
}

GenerationResult GenerationJob::run_rank(Communicator& comm,
                                         std::span<const std::int32_t> prompt) const {
  const Mesh& mesh = settings_.mesh;
  if (comm.size() != mesh.size()) {
    throw InvalidArgument(settings_.names("mesh") + " " + mesh.to_string() + " has " +
                          std::to_string(mesh.size()) + " devices but the job has " +
                          std::to_string(comm.size()) + " ranks");
  }
  if (threads_ > 0) kernels::set_blas_threads(threads_);
  const ParallelContext context(comm, mesh);
  DecodingModel model(settings_.model, context, settings_.values, 0, settings_.values_identity,
                      settings_.precision);
  return model.generate(prompt, settings_.options);
}

std::optional<GenerationResult> GenerationJob::run(const BackendInfo& backend,
                                                   std::span<const std::int32_t> prompt) const {
  std::mutex mutex;
  std::optional<GenerationResult> first;
  run_on_ranks(backend, static_cast<int>(settings_.mesh.size()), [&](Communicator& comm) {
    GenerationResult result = run_rank(comm, prompt);
    if (comm.rank() == 0) {
      const std::lock_guard lock(mutex);
      first = std::move(result);
    }
  });
  return first;
}

}  // namespace shardwise::train
