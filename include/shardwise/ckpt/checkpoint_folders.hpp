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

// Removes all but the newest `keep` of list_checkpoints(root) (keep >= 1); what cannot be
// removed is a CheckpointError.
void keep_newest(const std::filesystem::path& root, std::size_t keep);

// What --resume PATH names: PATH itself where it is a checkpoint (it holds an index), else the
// newest checkpoint in it. CheckpointError where there is none.
[[nodiscard]] std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace shardwise::ckpt
