#include "output_file.hpp"

#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <unistd.h>

#include <cerrno>

#include "shardwise/core/error.hpp"

namespace shardwise::detail {
namespace {

std::filesystem::path folder_of(const std::filesystem::path& path) {
  return path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
}

// Refuses what is at `path` where an output may not go.
void check_in_the_way(const std::filesystem::path& path, IfExists if_exists,
                      const std::string& what, const std::string& hint) {
  const std::string named = what + " '" + echo_input(path.string(), 200) + "'";
  if (path.filename().empty() || path.filename() == "." || path.filename() == "..") {
    throw FileError(named + " names a folder; expected a file's path");
  }
  const PathKind kind = path_kind(path);
  if (kind == PathKind::kAbsent) return;
  if (kind == PathKind::kFile) {
    if (if_exists == IfExists::kReplaceFile) return;
    throw FileError(named + " exists; it is left as it is" + hint);
  }
  throw FileError(named + " is " + path_kind_words(kind) +
                  "; shardwise writes only a new file or over a regular one, so it is left as "
                  "it is");
}

}  // namespace

void check_output_path(const std::filesystem::path& path, IfExists if_exists,
                       const std::string& what, const std::string& hint) {
  check_in_the_way(path, if_exists, what, hint);
  const std::filesystem::path folder = folder_of(path);
  if (path_kind(folder) == PathKind::kAbsent) {
    throw FileError(what + " '" + echo_input(path.string(), 200) + "': the folder '" +
                    echo_input(folder.string(), 200) + "' does not exist");
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw FileError(what + " '" + echo_input(path.string(), 200) + "': cannot write in " +
                    system_error_text(folder, errno));
  }
}

OutputFile::OutputFile(std::filesystem::path path, IfExists if_exists, std::string what,
                       std::string hint)
    : path_(std::move(path)),
      if_exists_(if_exists),
      what_(std::move(what)),
      hint_(std::move(hint)) {
  check_in_the_way(path_, if_exists_, what_, hint_);
  // A name no one else has: a file or symlink planted at a predictable partial name is never
  // opened (O_EXCL with O_NOFOLLOW fails on any existing entry).
  for (int attempt = 0;; ++attempt) {
    partial_ =
        folder_of(path_) / ("." + path_.filename().string() + "." + random_hex(6) + ".partial");
    const int fd =
        ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      file_ = File::adopt(fd, partial_);
      return;
    }
    if (errno != EEXIST || attempt >= 8) {
      throw FileError(what_ + ": cannot create " + system_error_text(partial_, errno));
    }
  }
}

OutputFile::~OutputFile() {
  if (!committed_) (void)::unlink(partial_.c_str());
}

void OutputFile::commit() {
  file_.sync();
  file_.close();
  if (if_exists_ == IfExists::kRefuse) {
    if (::renameat2(AT_FDCWD, partial_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0) {
      const int error = errno;
      if (error == EEXIST) {
        throw FileError(what_ + " '" + echo_input(path_.string(), 200) +
                        "' appeared while it was written; it is left as it is" + hint_);
      }
      if (error != EINVAL && error != ENOSYS) {
        throw FileError(what_ + ": cannot rename into place " + system_error_text(path_, error));
      }
      // A file system without RENAME_NOREPLACE (NFS): a hard link fails on any existing name.
      if (::link(partial_.c_str(), path_.c_str()) != 0) {
        const int cause = errno;
        throw FileError(what_ + ": cannot put into place " + system_error_text(path_, cause) +
                        (cause == EEXIST ? "; it is left as it is" + hint_ : std::string()));
      }
      (void)::unlink(partial_.c_str());
    }
  } else {
    // Only a regular file may be replaced: checked again just before (a narrow window remains
    // against a concurrent writer, never a write through what appeared).
    check_in_the_way(path_, if_exists_, what_, hint_);
    if (::rename(partial_.c_str(), path_.c_str()) != 0) {
      throw FileError(what_ + ": cannot rename into place " + system_error_text(path_, errno));
    }
  }
  committed_ = true;
  sync_directory(folder_of(path_));
}

void write_whole_file(const std::filesystem::path& path, std::string_view text, IfExists if_exists,
                      const std::string& what, const std::string& hint) {
  OutputFile file(path, if_exists, what, hint);
  file.write(text);
  file.commit();
}

}  // namespace shardwise::detail
