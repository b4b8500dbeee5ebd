#pragma once
// A file that appears whole or not at all, and never where it would replace or write through
// something the user did not ask to replace: it is written as a fresh file beside its place
// (".NAME.<random>.partial", created with O_EXCL and O_NOFOLLOW, so that no file, symlink or
// FIFO there is ever opened), fsynced, and renamed into place by commit(). A symlink, FIFO or
// folder at the path is always refused; a regular file there only where the caller allows its
// replacement (the rename replaces the name, never writes into the file or a link's target).

#include <filesystem>
#include <string>
#include <string_view>

#include "file_io.hpp"

namespace shardwise::detail {

enum class IfExists {
  kRefuse,       // anything at the path is refused and left as it is
  kReplaceFile,  // a regular file there is replaced (by the rename); anything else refused
};

class OutputFile {
 public:
  // Checks what is at `path` now (FileError prefixed by `what`, e.g. "--out", naming it, with
  // `hint` after a refusal of an existing file: "; --force replaces it") and creates the
  // partial file.
  OutputFile(std::filesystem::path path, IfExists if_exists, std::string what,
             std::string hint = {});
  // Uncommitted (a failure meanwhile), the partial file is removed.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t size) { file_.write_all(data, size); }
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, rename into place (refusing, for kRefuse, a file that appeared meanwhile), fsync of
  // the folder.
  void commit();

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path partial_;
  IfExists if_exists_;
  std::string what_;
  std::string hint_;
  File file_;
  bool committed_ = false;
};

// Checks, without creating anything, that an OutputFile at `path` could be made now: nothing
// in the way (as OutputFile's constructor refuses it) and a folder this process can write.
void check_output_path(const std::filesystem::path& path, IfExists if_exists,
                       const std::string& what, const std::string& hint = {});

// `text` as the whole file at `path`, through an OutputFile.
void write_whole_file(const std::filesystem::path& path, std::string_view text, IfExists if_exists,
                      const std::string& what, const std::string& hint = {});

}  // namespace shardwise::detail
