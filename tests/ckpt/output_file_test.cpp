// An output file appears whole or not at all, and never replaces or writes through what it may
// not: a file where refusing, a symlink, a FIFO or a folder always; a planted symlink at a
// predictable partial name is never opened.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "detail/output_file.hpp"
#include "shardwise/core/error.hpp"
#include "tree_snapshot.hpp"

namespace shardwise::detail {
namespace {

using shardwise::testing::tree_snapshot;
using ::testing::HasSubstr;

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("out_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

std::string contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string error_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const FileError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputFile, ANewFileAppearsWholeAndAnExistingOneOnlyWhereAllowed) {
  const auto root = fresh_folder("new");
  write_whole_file(root / "a.json", "{}", IfExists::kRefuse, "--out");
  EXPECT_EQ(contents(root / "a.json"), "{}");
  EXPECT_THAT(error_of([&] {
                write_whole_file(root / "a.json", "x", IfExists::kRefuse, "--out",
                                 "; --force replaces it");
              }),
              HasSubstr("--out '" + (root / "a.json").string() +
                        "' exists; it is left as it is; --force replaces it"));
  EXPECT_EQ(contents(root / "a.json"), "{}");
  write_whole_file(root / "a.json", "new", IfExists::kReplaceFile, "--out");
  EXPECT_EQ(contents(root / "a.json"), "new");
  // Nothing else is left in the folder: no partial file.
  EXPECT_EQ(tree_snapshot(root).size(), 1U);
}

TEST(OutputFile, SymlinksFifosAndFoldersAreNeverWrittenThrough) {
  const auto root = fresh_folder("links");
  std::ofstream(root / "target.txt") << "the user's";
  std::filesystem::create_symlink(root / "target.txt", root / "link.json");
  ASSERT_EQ(::mkfifo((root / "pipe.json").c_str(), 0644), 0);
  std::filesystem::create_directories(root / "dir.json");
  const auto before = tree_snapshot(root);
  for (const char* name : {"link.json", "pipe.json", "dir.json"}) {
    for (const IfExists policy : {IfExists::kRefuse, IfExists::kReplaceFile}) {
      EXPECT_THAT(error_of([&] { write_whole_file(root / name, "x", policy, "--timeline"); }),
                  HasSubstr("; shardwise writes only a new file or over a regular one"))
          << name;
      EXPECT_THAT(error_of([&] { check_output_path(root / name, policy, "--timeline"); }),
                  HasSubstr("left as it is"))
          << name;
    }
  }
  EXPECT_EQ(tree_snapshot(root), before);
}

TEST(OutputFile, AFileThatAppearsMeanwhileIsNotReplaced) {
  const auto root = fresh_folder("race");
  OutputFile file(root / "model.safetensors", IfExists::kRefuse, "--out");
  file.write("ours");
  std::ofstream(root / "model.safetensors") << "theirs";
  EXPECT_THAT(error_of([&] { file.commit(); }), HasSubstr("appeared while it was written"));
  EXPECT_EQ(contents(root / "model.safetensors"), "theirs");
}

TEST(OutputFile, AnUncommittedFileLeavesNothing) {
  const auto root = fresh_folder("uncommitted");
  {
    OutputFile file(root / "x.bin", IfExists::kRefuse, "--out");
    file.write("half");
  }
  EXPECT_TRUE(tree_snapshot(root).empty());
  EXPECT_THAT(
      error_of([&] { check_output_path(root / "missing" / "x", IfExists::kRefuse, "--out"); }),
      HasSubstr("does not exist"));
}

}  // namespace
}  // namespace shardwise::detail
