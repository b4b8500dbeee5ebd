#pragma once
// `shardwise train --save/--save-every/--keep/--save-async/--resume`: the trainer's state saved
// as a sharded checkpoint from every rank, and loaded into whatever layout the run has.

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
#include "shardwise/models/gpt.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::cli {

struct CheckpointFlags {
  std::optional<std::string> save;  // a folder of step-N checkpoints
  std::int64_t save_every = 0;      // 0: at the last step only
  std::int64_t keep = 0;            // 0: every one
  bool save_async = false;
  std::optional<std::string> resume;  // a checkpoint, or a folder of them (the newest)
};

// What --resume names, as check_resume found it before any rank started.
struct ResumePoint {
  std::int64_t step = 0;  // the run continues after it (0: a fresh run)
};

// InvalidArgument naming the flag: --save-every, --keep or --save-async without --save, or
// out of range; --save where this run would save a step at a folder that is not its own (a
// user's folder, another run's checkpoint), which is left as it is. Nothing is made.
void check_checkpoint_flags(const CheckpointFlags& flags, std::int64_t steps,
                            const ResumePoint& resume);

// What a checkpoint's metadata says of the run that saved it.
struct CheckpointInfo {
  models::GptConfig gpt;
  std::int64_t step = 0;
  bool has_optimizer = false;
};

// The metadata a training checkpoint carries: the step, the model, and the run's resolved
// configuration (`run_config`, config.json's text).
[[nodiscard]] std::string checkpoint_metadata(const models::GptConfig& gpt, std::int64_t step,
                                              const std::string& run_config);
// CheckpointError naming the field where the metadata lacks the step or the model.
[[nodiscard]] CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index,
                                             const std::string& what);

// The arrays a checkpoint of the whole model `gpt` holds: each parameter's values, and its
// AdamW moments where with_optimizer.
[[nodiscard]] std::vector<std::string> gpt_checkpoint_arrays(const models::GptConfig& gpt,
                                                             bool with_optimizer);

// The words for the first value of `values` (the block `box` of `array`) that is not finite,
// prefixed by `what`; empty where every one is.
[[nodiscard]] std::string non_finite_value(std::span<const float> values, const std::string& array,
                                           const ShardIndex& box, const std::string& what);

// CheckpointError naming the array where one of the model's arrays in `index` has another shape
// than `gpt`'s parameter (or is not f32): checked before anything of the model's size is made.
void require_gpt_shapes(const ckpt::CheckpointIndex& index, const models::GptConfig& gpt,
                        bool with_optimizer, const std::string& what);

// What --resume names, checked before any rank starts (a command that streams must refuse bad
// input before it prints): a checkpoint whose index reads, of the model `gpt`, holding every
// array the run needs with the model's shapes, of a step at most `steps`. CheckpointError
// naming what is wrong.
[[nodiscard]] ResumePoint check_resume(const CheckpointFlags& flags, const models::GptConfig& gpt,
                                       std::int64_t steps);

// One rank's checkpoints during a run (collective calls: every rank makes them alike).
class TrainingCheckpoints {
 public:
  using Say = std::function<void(const std::string&)>;
  TrainingCheckpoints(CheckpointFlags flags, Communicator& comm, train::Trainer& trainer,
                      models::GptConfig gpt, std::string run_config, Say say);
  ~TrainingCheckpoints();
  TrainingCheckpoints(const TrainingCheckpoints&) = delete;
  TrainingCheckpoints& operator=(const TrainingCheckpoints&) = delete;

  // Loads --resume's state into the trainer and returns the step it continues after (0
  // without --resume). A checkpoint of another model, or one that lacks an array the run needs,
  // is a CheckpointError naming it; so is a value that is not finite, and ranks that found
  // checkpoints of different bytes at the path. A checkpoint without optimizer state (an
  // import) starts the moments at zero. Every run takes a new run id (two continuations of one
  // checkpoint are two runs, and neither replaces the other's saves); the resumed checkpoint's
  // run and its own ancestors become this run's ancestors, whose checkpoints up to the step
  // continued from --keep may remove.
  std::int64_t resume();
  [[nodiscard]] const std::string& run_id() const { return run_id_; }
  // After step `step` of `steps`: saves where --save-every or the last step asks; with
  // --save-async, commits a background save once every rank has written it.
  void after_step(std::int64_t step, std::int64_t steps);
  // Waits for a background save and commits it.
  void finish();

 private:
  void save(std::int64_t step);
  void commit_pending();
  // --keep: removes the run's checkpoints older than the K newest up to `saved_step` (rank 0;
  // what it leaves, and a failure, is a note, not the run's end).
  void prune(std::int64_t saved_step);
  // Rank 0 says each note once.
  void note(const std::string& text);

  CheckpointFlags flags_;
  Communicator& comm_;
  train::Trainer& trainer_;
  models::GptConfig gpt_;
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
  // Rank 0, with --save: this run alone saves into the folder.
  std::unique_ptr<ckpt::SaveFolderLock> lock_;
  std::string run_id_;
  std::vector<ckpt::RunAncestor> ancestors_;
  std::set<std::string> noted_;
  bool warned_newer_ = false;
};

}  // namespace shardwise::cli
