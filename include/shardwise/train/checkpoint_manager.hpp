#pragma once
// A run's checkpoints, for any model the trainer trains: save (every N steps and at the last),
// keep the newest K, save in the background, resume into whatever layout the run has, and say
// what a continuation changes. The checkpoint format, the rules of what a save may replace or
// remove and the lock on a folder are the ckpt layer's (docs/checkpoints.md); this joins them to
// the trainer (Trainer::state_blocks).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
#include "shardwise/ckpt/save_folder_lock.hpp"
#include "shardwise/comm/communicator.hpp"
#include "shardwise/train/model_definition.hpp"
#include "shardwise/train/parameter_store.hpp"
#include "shardwise/train/setting_names.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train {

// One block of a parameter a run starts from: the whole parameter's name, shape, the block's
// box in it and where its values go (row-major).
struct ParameterBlock {
  std::string name;
  Shape shape;
  ShardIndex box;
  std::span<float> values;
};
// Values a run starts from in place of its seed's, filling every block of this rank's at once
// (on every rank, before the first step); throws naming what is wrong. A Hugging Face folder's
// through its family: models::hf_initial_values.
using InitialValues = std::function<void(std::span<const ParameterBlock> blocks)>;

// When and where a run saves, and what it continues from. Messages name the fields as the
// `shardwise train` flags of the same names.
struct CheckpointPolicy {
  std::optional<std::string> save;  // a folder of step-N checkpoints
  std::int64_t save_every = 0;      // 0: at the last step only
  std::int64_t keep = 0;            // 0: every one
  bool save_async = false;
  std::optional<std::string> resume;  // a checkpoint, or a folder of them (the newest)
  // The values a fresh run starts from (fine-tuning; at most one of it and resume), and what
  // they are in words for messages ("--init-from 'DIR'").
  InitialValues init_from;
  std::string init_from_words;
  std::optional<std::string> init_from_path;  // the folder init_from was read from (the logs)
  // How the caller names these settings in messages (JobSettings::names).
  SettingNames names;
  // The run keeps a Mixture of Experts' expert bias (JobSettings::expert_bias_rate above 0): a
  // checkpoint's bias is resumed, and a checkpoint holding one is refused to a run without.
  bool expert_bias = false;
};

// What a checkpoint says of its model, as the model's family writes and reads it.
struct CheckpointedModel {
  // The metadata's "model": a JSON object the family writes (a GPT's sizes); a checkpoint
  // resumes only into a model whose object is the same.
  std::string metadata_json = "{}";
  // A model's object in words for messages ("a GPT of n_layer 2, ..."); this model's when given
  // its own object.
  std::function<std::string(const std::string& metadata_json)> describe;
  // The whole model's parameters: the arrays a checkpoint of it holds, with their shapes.
  std::vector<ParameterSpec> parameters;
};

// A model definition as its checkpoints describe it: config_json() as the metadata's "model",
// describe_config for a checkpoint's model in words, parameters().
[[nodiscard]] CheckpointedModel checkpointed_model(std::shared_ptr<const ModelDefinition> model);

// The metadata a training checkpoint carries: the step, the model's object, and the run's
// resolved configuration (`run_config`, a JSON object's text; empty for none).
[[nodiscard]] std::string checkpoint_metadata(const std::string& model_json, std::int64_t step,
                                              const std::string& run_config);

// The step a checkpoint's metadata records (CheckpointError naming `what` where it lacks one).
[[nodiscard]] std::int64_t checkpoint_step(const ckpt::CheckpointIndex& index,
                                           const std::string& what);

// The arrays a checkpoint of `parameters` holds: each one's values, and its AdamW moments where
// `with_optimizer`.
[[nodiscard]] std::vector<std::string> checkpoint_arrays(
    const std::vector<ParameterSpec>& parameters, bool with_optimizer);

// CheckpointError naming the array where one of `parameters`' arrays in `index` has another
// shape or is not f32 (checked before anything of the model's size is made).
void require_checkpoint_shapes(const ckpt::CheckpointIndex& index,
                               const std::vector<ParameterSpec>& parameters, bool with_optimizer,
                               const std::string& what);

// The words for the first value of `values` (the block `box` of `array`) that is not finite,
// prefixed by `what`; empty where every one is.
[[nodiscard]] std::string non_finite_value(std::span<const float> values, const std::string& array,
                                           const ShardIndex& box, const std::string& what);

// What --resume names, as check_resume found it before any rank started.
struct ResumePoint {
  std::int64_t step = 0;  // the run continues after it (0: a fresh run)
};

// InvalidArgument naming the field: save_every, keep or save_async without save, or out of
// range; a save folder this run cannot write; a step this run saves landing on a folder that
// is not its own (a user's folder, another run's checkpoint), which is left as it is. Nothing
// is made.
void check_checkpoint_policy(const CheckpointPolicy& policy, std::int64_t steps,
                             const ResumePoint& resume);

// What policy.resume names, checked before any rank starts (a command that streams must refuse
// bad input before it prints): a checkpoint whose index reads, of `model`, holding every array
// the run needs with the model's shapes and whole files, of a step at most `steps`.
// CheckpointError naming what is wrong.
[[nodiscard]] ResumePoint check_resume(const CheckpointPolicy& policy,
                                       const CheckpointedModel& model, std::int64_t steps);

// One rank's checkpoints during a run (collective calls: every rank makes them alike).
class CheckpointManager {
 public:
  using Say = std::function<void(const std::string&)>;
  // Collective: with a save folder, rank 0 takes its lock (ckpt::SaveFolderLock); every rank
  // fails alike where it cannot.
  CheckpointManager(CheckpointPolicy policy, Communicator& comm, Trainer& trainer,
                    CheckpointedModel model, std::string run_config, Say say);
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Loads policy.resume's state into the trainer and returns the step it continues after (0
  // without one); without one, policy.init_from's values where it is set. A checkpoint of another
  // model, or one that lacks an array the run needs, is a CheckpointError naming it; so is a value
  // that is not finite, and ranks that found checkpoints of different bytes at the path. A
  // checkpoint without optimizer state (an import) starts the moments at zero. Every run takes a
  // new run id (two continuations of one checkpoint are two runs, and neither replaces the other's
  // saves); the resumed checkpoint's run and its own ancestors become this run's ancestors, whose
  // checkpoints up to the step continued from keep may remove.
  std::int64_t resume();
  [[nodiscard]] const std::string& run_id() const { return run_id_; }
  // After step `step` of `steps`: saves where save_every or the last step asks; with
  // save_async, commits a background save once every rank has written it.
  void after_step(std::int64_t step, std::int64_t steps);
  // Waits for a background save and commits it.
  void finish();

 private:
  void save(std::int64_t step);
  void initialise();
  void commit_pending();
  // keep: removes the line's checkpoints older than the K newest up to `saved_step` (rank 0;
  // what it leaves, and a failure, is a note, not the run's end).
  void prune(std::int64_t saved_step);
  // Rank 0 says each note once.
  void note(const std::string& text);

  CheckpointPolicy policy_;
  Communicator& comm_;
  Trainer& trainer_;
  CheckpointedModel model_;
  std::string run_config_;
  Say say_;
  // A background save: its step, the copies of this rank's blocks (written by the save's own
  // thread).
  struct Pending {
    std::int64_t step = 0;
    std::vector<std::vector<std::byte>> copies;
    std::unique_ptr<ckpt::CheckpointSave> save;
    double blocked_seconds = 0;
  };
  std::unique_ptr<Pending> pending_;
  // Rank 0, with a save folder: this run alone saves into it.
  std::unique_ptr<ckpt::SaveFolderLock> lock_;
  std::string run_id_;
  std::vector<ckpt::RunAncestor> ancestors_;
  std::set<std::string> noted_;
  bool warned_newer_ = false;
};

}  // namespace shardwise::train
