#pragma once
// A folder of a run's checkpoints: one per saved step, "step-00000100", each whole (a save
// renames it into place after its index is written); --keep K keeps the newest K.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardwise::ckpt {

// "step-00000100" (at least eight digits).
[[nodiscard]] std::string step_folder_name(std::int64_t step);

struct SavedStep {
  std::int64_t step = 0;
  std::filesystem::path folder;
};

// The whole checkpoints in `root` (folders named by step that hold an index), oldest first;
// none where `root` does not exist.
[[nodiscard]] std::vector<SavedStep> list_checkpoints(const std::filesystem::path& root);

// Of list_checkpoints(root) up to step `up_to` (the one just saved), removes all but the newest
// `keep` (keep >= 1); newer ones (another run's) are left. Each goes by a rename to
// ".step-N.removing" first, so that a removal killed halfway never leaves a folder that looks
// like a checkpoint and lacks files. What cannot be removed is a CheckpointError.
void keep_newest(const std::filesystem::path& root, std::size_t keep, std::int64_t up_to);

// Removes what saves and removals killed halfway left in `root`: ".step-N.partial",
// ".step-N.old" and ".step-N.removing" folders. Only while no save into `root` is under way.
void remove_leftovers(const std::filesystem::path& root);

// What a checkpoint argument names: PATH itself where it is a checkpoint (it holds an index),
// else the newest checkpoint in it. CheckpointError naming `flag` where there is none.
[[nodiscard]] std::filesystem::path resolve_checkpoint(const std::filesystem::path& path,
                                                       const std::string& flag = "--resume");

}  // namespace shardwise::ckpt
