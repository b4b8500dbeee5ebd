#pragma once
// The one run that saves into a folder of checkpoints holds its lock (rank 0's process, for the
// whole run): a second run started on the same --save folder is refused at once, with one line,
// instead of both writing the same step's folder. The lock is flock(2) on a file of the folder,
// ".shardwise-save.lock", which the holder removes when it lets go where it made it (the folders
// this lock made, and that are empty then, go too), so that a run that never saved leaves
// nothing behind; a file of that name that was there stays.

#include <filesystem>
#include <string>
#include <vector>

namespace shardwise::ckpt {

class SaveFolderLock {
 public:
  // Makes `root` where it is missing and takes its lock. CheckpointError naming `flag` where
  // another holder has it, where the lock's name holds something else than a regular file (a
  // symlink is never followed), or where the folder cannot be made.
  explicit SaveFolderLock(std::filesystem::path root, std::string flag = "--save");
  ~SaveFolderLock();
  SaveFolderLock(const SaveFolderLock&) = delete;
  SaveFolderLock& operator=(const SaveFolderLock&) = delete;

  [[nodiscard]] const std::filesystem::path& root() const { return root_; }

  static constexpr const char* kFileName = ".shardwise-save.lock";

 private:
  std::filesystem::path root_;
  int fd_ = -1;
  std::vector<std::filesystem::path> made_;  // the folders it made, deepest first
  bool made_file_ = false;
};

}  // namespace shardwise::ckpt
