#pragma once
// A folder of a run's checkpoints: one per saved step, "step-00000100", each whole (a save
// renames it into place after its index is written); --keep K keeps the newest K.
//
// What a save may replace or remove is only what shardwise wrote for the same run: a folder
// (never a symlink) whose index.json parses as a shardwise index recording that run's id, and
// which holds no file its index does not name; and the temporary folders of that run's saves
// (".NAME.<run id>.partial", ".removing", ".old"). Anything else (a user's folder that happens
// to hold an index.json, another run's checkpoint, a checkpoint of no recorded run) is left as
// it is, with a note that says why.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_index.hpp"

namespace shardwise::ckpt {

// "step-00000100" (at least eight digits).
[[nodiscard]] std::string step_folder_name(std::int64_t step);
// The step of a folder named "step-" and 1 to 18 digits; -1 for any other name.
[[nodiscard]] std::int64_t step_of_folder_name(const std::string& name);

struct SavedStep {
  std::int64_t step = 0;
  std::filesystem::path folder;
};

// The whole checkpoints in `root` (folders, not symlinks, named by step that hold an index),
// oldest first; none where `root` does not exist.
[[nodiscard]] std::vector<SavedStep> list_checkpoints(const std::filesystem::path& root);

// What is at a path where a save of run `run_id` would put a checkpoint.
struct SavePlace {
  enum class Occupant { kNothing, kThisRunsCheckpoint, kOther };
  Occupant occupant = Occupant::kNothing;
  std::string why;  // for kOther: "is another run's checkpoint", "is a symlink", ...
};
[[nodiscard]] SavePlace inspect_save_place(const std::filesystem::path& folder,
                                           const std::string& run_id);

// The temporary folder of run `run_id`'s save of `folder`: ".NAME.<run id>.<role>" beside it,
// role "partial" (being written), "old" (swapped out) or "removing".
[[nodiscard]] std::filesystem::path save_work_folder(const std::filesystem::path& folder,
                                                     const std::string& run_id,
                                                     const std::string& role);

// Removes `folder` if it is run `run_id`'s checkpoint (inspect_save_place), by a rename to its
// ".removing" name first, so that a removal killed halfway never leaves a folder that looks
// like a checkpoint and lacks files; only the files shardwise writes are removed, through the
// folder held open (what moved must be what was inspected). Returns a note saying why where it
// leaves anything.
[[nodiscard]] std::optional<std::string> remove_checkpoint(const std::filesystem::path& folder,
                                                           const std::string& run_id);

// Removes a temporary folder of a save (save_work_folder's): the files shardwise writes in it
// (index.json, rank-N.safetensors), then the folder, through a descriptor opened without
// following a symlink; where anything else is in it, nothing is removed and a note says why.
// No error where it is absent.
[[nodiscard]] std::optional<std::string> remove_save_work_folder(
    const std::filesystem::path& folder);

// Of the line's checkpoints in `root` up to step `up_to` (the one just saved), removes all but
// the newest `keep` (keep >= 1). The line is run `run_id` and the runs it continues
// (`ancestors`), each up to the step it was continued from: an ancestor's later checkpoints
// belong to another branch and stay. Returns a note for each checkpoint-like folder it leaves
// that is not the line's (another run's, a user's), and for what it could not remove.
[[nodiscard]] std::vector<std::string> keep_newest(const std::filesystem::path& root,
                                                   std::size_t keep, std::int64_t up_to,
                                                   const std::string& run_id,
                                                   const std::vector<RunAncestor>& ancestors = {});

// Removes what the line's saves and removals killed halfway left in `root` (their
// save_work_folder folders, of run `run_id` or an ancestor); returns notes for what it leaves.
// Only while no save of the run into `root` is under way.
[[nodiscard]] std::vector<std::string> remove_leftovers(
    const std::filesystem::path& root, const std::string& run_id,
    const std::vector<RunAncestor>& ancestors = {});

// What a checkpoint argument names: PATH itself where it is a checkpoint (it holds an index),
// else the newest checkpoint in it. CheckpointError naming `flag` where there is none.
[[nodiscard]] std::filesystem::path resolve_checkpoint(const std::filesystem::path& path,
                                                       const std::string& flag = "--resume");

}  // namespace shardwise::ckpt
