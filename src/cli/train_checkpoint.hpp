#pragma once
// `shardwise train --save/--save-every/--keep/--save-async/--resume`: the trainer's state saved
// as a sharded checkpoint from every rank, and loaded into whatever layout the run has.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/ckpt/checkpoint_save.hpp"
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

// InvalidArgument naming the flag: --save-every, --keep or --save-async without --save, or
// out of range.
void check_checkpoint_flags(const CheckpointFlags& flags, std::int64_t steps);

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

// What --resume names, checked before any rank starts (a command that streams must refuse bad
// input before it prints): a checkpoint whose index reads, of the model `gpt`, holding every
// array the run needs, of a step at most `steps`. CheckpointError naming what is wrong.
void check_resume(const CheckpointFlags& flags, const models::GptConfig& gpt, std::int64_t steps);

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
  // is a CheckpointError naming it. A checkpoint without optimizer state (an import) starts
  // the moments at zero.
  std::int64_t resume();
  // After step `step` of `steps`: saves where --save-every or the last step asks; with
  // --save-async, commits a background save once every rank has written it.
  void after_step(std::int64_t step, std::int64_t steps);
  // Waits for a background save and commits it.
  void finish();

 private:
  void save(std::int64_t step);
  void commit_pending();
  // --keep: removes checkpoints older than the K newest up to `saved_step` (rank 0; a failure
  // is a warning, not the run's end).
  void prune(std::int64_t saved_step);
  [[nodiscard]] bool every_rank_wrote();

  CheckpointFlags flags_;
  Communicator& comm_;
  train::Trainer& trainer_;
  models::GptConfig gpt_;
  std::string run_config_;
  Say say_;
  // A background save: its step, the copies of this rank's blocks, the writer thread.
  struct Pending {
    std::int64_t step = 0;
    std::unique_ptr<ckpt::CheckpointSave> save;
    std::vector<std::vector<std::byte>> copies;
    std::thread writer;
    std::atomic<bool> written{false};
    double blocked_seconds = 0;
  };
  std::unique_ptr<Pending> pending_;
  bool warned_newer_ = false;
};

}  // namespace shardwise::cli
