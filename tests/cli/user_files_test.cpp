// No command deletes, replaces or writes through what it did not create: a user's folder that
// holds an index.json, another run's checkpoints, dot-named folders, symlinks and FIFOs at every
// output path all survive byte for byte, each refusal one line with status 2.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/tree_snapshot.hpp"
#include "run_command.hpp"
#include "shardwise/ckpt/save_folder_lock.hpp"

namespace shardwise::cli {
namespace {

using shardwise::testing::tree_snapshot;
using testing::expect_bad_input;
using ::testing::HasSubstr;
using testing::run_command;
using testing::source_path;

std::filesystem::path fresh_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("user_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<std::string> train(const std::filesystem::path& save, std::vector<std::string> more,
                               const std::string& steps = "4") {
  std::vector<std::string> args{"train",   "--model", source_path("examples/models/gpt_micro.json"),
                                "--steps", steps,     "--batch",
                                "4",       "--save",  save.string()};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::vector<std::string> entries(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(UserFiles, ASaveNeverReplacesAUsersFolderOrASymlink) {
  const auto root = fresh_folder("save");
  write_file(root / "D" / "step-00000004" / "index.json", "{\"mine\": 1}");
  write_file(root / "D" / "step-00000004" / "photo.jpg", "pixels");
  const auto before = tree_snapshot(root);
  expect_bad_input(train(root / "D", {}),
                   "step-00000004' holds an index.json that is no shardwise checkpoint's");
  EXPECT_EQ(tree_snapshot(root), before);
  // A symlink where a step's folder would go, to a folder of the user's.
  write_file(root / "elsewhere" / "keep.txt", "x");
  std::filesystem::create_directories(root / "L");
  std::filesystem::create_directory_symlink(root / "elsewhere", root / "L" / "step-00000004");
  const auto linked = tree_snapshot(root);
  expect_bad_input(train(root / "L", {}), "step-00000004' is a symlink");
  EXPECT_EQ(tree_snapshot(root), linked);
  // Running the same command twice: the second run's step 4 would replace the first run's.
  ASSERT_EQ(run_command(train(root / "twice", {})).status, 0);
  const auto first = tree_snapshot(root / "twice");
  expect_bad_input(train(root / "twice", {}), "step-00000004' is another run's checkpoint (run ");
  EXPECT_EQ(tree_snapshot(root / "twice"), first);
  // Continuing that run (--resume) into the same folder is the same run: it saves on.
  const auto continued =
      run_command(train(root / "twice", {"--resume", (root / "twice").string()}, "6"));
  EXPECT_EQ(continued.status, 0) << continued.err;
  EXPECT_EQ(entries(root / "twice"), (std::vector<std::string>{"step-00000004", "step-00000006"}));
}

// Two runs continued from one checkpoint are two runs: the second does not replace the
// first's saves (it is refused before training), whatever it was continued from.
TEST(UserFiles, TwoContinuationsOfOneCheckpointDoNotReplaceEachOther) {
  const auto root = fresh_folder("forks");
  ASSERT_EQ(run_command(train(root / "base", {}, "2")).status, 0);
  const std::string from = (root / "base" / "step-00000002").string();
  ASSERT_EQ(run_command(train(root / "ft", {"--resume", from, "--seed", "1"})).status, 0);
  const auto first = tree_snapshot(root / "ft");
  expect_bad_input(train(root / "ft", {"--resume", from, "--seed", "2"}),
                   "step-00000004' is another run's checkpoint (run ");
  EXPECT_EQ(tree_snapshot(root / "ft"), first);
  // A continuation of the newest checkpoint into the same folder goes on saving, and --keep
  // removes the line's earlier checkpoints, the base run's up to where it was continued.
  const auto on =
      run_command(train(root / "base", {"--resume", (root / "base").string(), "--keep", "1"}, "6"));
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_EQ(entries(root / "base"), std::vector<std::string>{"step-00000006"});
}

TEST(UserFiles, KeepAndCleanupRemoveOnlyTheRunsOwn) {
  const auto root = fresh_folder("keep");
  const auto d1 = root / "d1";
  // Another run (seed 99) saved steps 1 to 3 here; a user's folders sit beside them.
  ASSERT_EQ(run_command(train(d1, {"--seed", "99", "--save-every", "1"}, "3")).status, 0);
  write_file(d1 / "step-00000000" / "index.json", "user data");
  for (const char* name :
       {".step-3.partial", ".step-00000004.removing", ".step-5.old", ".step-00000006.partial"}) {
    write_file(d1 / name / "rank-00000.safetensors", "the user's");
  }
  const auto before = tree_snapshot(d1);
  // This run saves steps 2 and 4: step 2 is the other run's, so it is refused before training.
  expect_bad_input(train(d1, {"--save-every", "2", "--keep", "1"}),
                   "step-00000002' is another run's checkpoint");
  EXPECT_EQ(tree_snapshot(d1), before);
  // Saving steps 4, 8, 12 with --keep 1: only its own 4 and 8 go.
  const auto kept = run_command(train(d1, {"--save-every", "4", "--keep", "1"}, "12"));
  ASSERT_EQ(kept.status, 0) << kept.err;
  EXPECT_THAT(kept.out, HasSubstr("note: --keep leaves"));
  std::map<std::string, std::string> expected = before;
  auto after = tree_snapshot(d1);
  for (auto it = after.begin(); it != after.end();) {
    it = it->first.rfind("step-00000012", 0) == 0 ? after.erase(it) : std::next(it);
  }
  EXPECT_EQ(after, expected);
  EXPECT_TRUE(std::filesystem::exists(d1 / "step-00000012" / "index.json"));
}

TEST(UserFiles, ASecondRunOnALockedFolderIsRefused) {
  const auto root = fresh_folder("lock");
  const ckpt::SaveFolderLock held(root / "conc");
  const auto result = run_command(train(root / "conc", {}));
  EXPECT_EQ(result.status, 2);
  EXPECT_THAT(result.err, HasSubstr("is in use: another run is saving into it"));
  EXPECT_EQ(result.out.find("step "), std::string::npos) << "trained before refusing";
  EXPECT_EQ(entries(root / "conc"), (std::vector<std::string>{".shardwise-save.lock"}));
  // Nor are its logs made: a retry once the folder is free finds no logs in the way.
  const auto logged = run_command(train(root / "conc", {"--log-dir", (root / "logs").string()}));
  EXPECT_EQ(logged.status, 2);
  EXPECT_FALSE(std::filesystem::exists(root / "logs"));
}

TEST(UserFiles, ExportKeepsAUsersModelFolderUnlessForced) {
  const auto root = fresh_folder("export");
  ASSERT_EQ(run_command(train(root / "ck", {}, "2")).status, 0);
  const std::string ck = (root / "ck").string();
  write_file(root / "hf" / "config.json", "{\"user\": true}");
  write_file(root / "hf" / "model.safetensors", "weights of the user's");
  const auto before = tree_snapshot(root / "hf");
  expect_bad_input({"ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "hf").string()},
                   "exists; it is left as it is; --force replaces it");
  EXPECT_EQ(tree_snapshot(root / "hf"), before);
  // --force replaces an earlier export alone: a folder of the user's (transformers', the Hub's)
  // is left as it is, with or without its model.safetensors.
  expect_bad_input(
      {"ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "hf").string(), "--force"},
      "holds a model.safetensors that ckpt export did not write (a Hugging Face folder's own); it "
      "is left as it is (--force replaces only an earlier export)");
  EXPECT_EQ(tree_snapshot(root / "hf"), before);
  std::filesystem::remove(root / "hf" / "model.safetensors");
  const auto config_only = tree_snapshot(root / "hf");
  expect_bad_input(
      {"ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "hf").string(), "--force"},
      "holds a config.json that ckpt export did not write");
  EXPECT_EQ(tree_snapshot(root / "hf"), config_only);
  ASSERT_EQ(run_command({"ckpt", "export", ck, "--format", "hf-gpt2", "--out",
                         (root / "exported").string()})
                .status,
            0);
  const auto exported = tree_snapshot(root / "exported");
  write_file(root / "exported" / "config.json", "{\"edited\": true}");
  const auto forced = run_command({"ckpt", "export", ck, "--format", "hf-gpt2", "--out",
                                   (root / "exported").string(), "--force"});
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(tree_snapshot(root / "exported"), exported);
  // A symlinked config.json and a FIFO: never written through, not even with --force.
  write_file(root / "target.txt", "the user's file");
  std::filesystem::create_directories(root / "links");
  std::filesystem::create_symlink(root / "target.txt", root / "links" / "config.json");
  ASSERT_EQ(::mkfifo((root / "links" / "model.safetensors").c_str(), 0644), 0);
  const auto links = tree_snapshot(root);
  for (const bool force : {false, true}) {
    std::vector<std::string> args{
        "ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "links").string()};
    if (force) args.push_back("--force");
    expect_bad_input(args, "is a FIFO, device or socket; shardwise writes only a new file");
  }
  std::filesystem::remove(root / "links" / "model.safetensors");
  expect_bad_input(
      {"ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "links").string(), "--force"},
      "config.json' is a symlink");
  std::map<std::string, std::string> expected = links;
  expected.erase("links/model.safetensors");
  EXPECT_EQ(tree_snapshot(root), expected);
  // Without the FIFO and the symlinked config, the export writes, and leaves no partial file.
  std::filesystem::remove(root / "links" / "config.json");
  const auto written = run_command(
      {"ckpt", "export", ck, "--format", "hf-gpt2", "--out", (root / "links").string()});
  ASSERT_EQ(written.status, 0) << written.err;
  EXPECT_EQ(entries(root / "links"),
            (std::vector<std::string>{"config.json", "model.safetensors"}));
  std::ifstream target(root / "target.txt");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(target), {}), "the user's file");
}

TEST(UserFiles, ImportReplacesOnlyAnEarlierImport) {
  const auto root = fresh_folder("import");
  ASSERT_EQ(run_command(train(root / "ck", {}, "2")).status, 0);
  const std::string hf = (root / "hf").string();
  ASSERT_EQ(
      run_command({"ckpt", "export", (root / "ck").string(), "--format", "hf-gpt2", "--out", hf})
          .status,
      0);
  // A user's site that happens to hold an index.json: refused, with --force too.
  write_file(root / "site" / "index.json", "<html></html>");
  for (int i = 0; i < 7; ++i) write_file(root / "site" / ("page" + std::to_string(i)), "text");
  const auto site = tree_snapshot(root / "site");
  for (const bool force : {false, true}) {
    std::vector<std::string> args{
        "ckpt", "import", hf, "--format", "hf-gpt2", "--out", (root / "site").string()};
    if (force) args.push_back("--force");
    expect_bad_input(args,
                     "site' exists; it is left as it is (--force replaces only an earlier "
                     "import)");
  }
  EXPECT_EQ(tree_snapshot(root / "site"), site);
  // A checkpoint of a training run is no import either.
  expect_bad_input({"ckpt", "import", hf, "--format", "hf-gpt2", "--out",
                    (root / "ck" / "step-00000002").string(), "--force"},
                   "--force replaces only an earlier import");
  const std::vector<std::string> import{
      "ckpt",    "import", hf, "--format", "hf-gpt2", "--out", (root / "imported").string(),
      "--ranks", "2"};
  ASSERT_EQ(run_command(import).status, 0);
  expect_bad_input(import, "(an earlier import); it is left as it is; --force replaces it");
  std::vector<std::string> forced = import;
  forced.push_back("--force");
  const auto replaced = run_command(forced);
  EXPECT_EQ(replaced.status, 0) << replaced.err;
  EXPECT_EQ(
      entries(root / "imported"),
      (std::vector<std::string>{"index.json", "rank-00000.safetensors", "rank-00001.safetensors"}));
}

TEST(UserFiles, ATimelineIsNeverWrittenThroughASymlinkOrIntoAFifo) {
  const auto root = fresh_folder("timeline");
  write_file(root / "target.json", "the user's");
  std::filesystem::create_symlink(root / "target.json", root / "link.json");
  ASSERT_EQ(::mkfifo((root / "pipe.json").c_str(), 0644), 0);
  const auto before = tree_snapshot(root);
  for (const char* name : {"link.json", "pipe.json"}) {
    expect_bad_input(
        {"train", "--model", source_path("examples/models/gpt_micro.json"), "--mesh", "pipeline=2",
         "--steps", "1", "--batch", "4", "--timeline", (root / name).string()},
        "shardwise writes only a new file or over a regular one");
  }
  EXPECT_EQ(tree_snapshot(root), before);
}

TEST(UserFiles, ARunWithNoStepsLeftInventsNoFigures) {
  const auto root = fresh_folder("nosteps");
  ASSERT_EQ(run_command(train(root / "ck", {})).status, 0);
  const auto json = run_command({"train", "--model", source_path("examples/models/gpt_micro.json"),
                                 "--steps", "4", "--batch", "4", "--resume",
                                 (root / "ck" / "step-00000004").string(), "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json summary = testing::json_lines(json.out).back()["summary"];
  EXPECT_EQ(summary["steps_run"], 0);
  EXPECT_TRUE(summary["final_loss"].is_null());
  EXPECT_TRUE(summary["tokens_per_s"].is_null());
  const auto text =
      run_command({"train", "--model", source_path("examples/models/gpt_micro.json"), "--steps",
                   "4", "--batch", "4", "--resume", (root / "ck").string()});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("done: no steps left: the checkpoint is of step 4, and --steps "
                                  "is 4"));
  EXPECT_EQ(text.out.find("tok/s"), std::string::npos) << text.out;
}

TEST(UserFiles, PathsThatAreNotUtf8AreStoredAndPrintedEscaped) {
  const auto root = fresh_folder(std::string("bytes_\xff"));
  const std::filesystem::path data = root / "data\xfe.txt";
  write_file(data, std::string(4000, 'a') + "some text to train on, repeated. ");
  const std::filesystem::path ck = root / "ck\xff";
  const auto trained = run_command(
      train(ck, {"--data", data.string(), "--log-dir", (root / "logs\xff").string()}, "2"));
  ASSERT_EQ(trained.status, 0) << trained.err;
  const auto inspected = run_command({"ckpt", "inspect", ck.string(), "--json"});
  ASSERT_EQ(inspected.status, 0) << inspected.err;
  EXPECT_THAT(nlohmann::json::parse(inspected.out)["folder"].get<std::string>(),
              HasSubstr("ck\\xff"));
  std::ifstream config(root / "logs\xff" / "config.json");
  const nlohmann::json logged = nlohmann::json::parse(config);
  EXPECT_THAT(logged["data"]["train"]["path"].get<std::string>(), HasSubstr("data\\xfe.txt"));
  // A model file, a checkpoint to import and an export, all at such paths.
  write_file(root / "model\xff.json",
             R"({"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256})");
  const auto modelled =
      run_command({"train", "--model", (root / "model\xff.json").string(), "--steps", "1",
                   "--batch", "4", "--data", data.string(), "--save", (root / "m\xff").string()});
  ASSERT_EQ(modelled.status, 0) << modelled.err;
  const auto exported = run_command({"ckpt", "export", (root / "m\xff").string(), "--format",
                                     "hf-gpt2", "--out", (root / "hf\xff").string()});
  ASSERT_EQ(exported.status, 0) << exported.err;
  const auto imported = run_command({"ckpt", "import", (root / "hf\xff").string(), "--format",
                                     "hf-gpt2", "--out", (root / "in\xff").string()});
  ASSERT_EQ(imported.status, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("hf\\xff"));
  // A refusal prints the bytes escaped, in one line.
  const auto refused = run_command(train(ck, {"--data", data.string(), "--steps", "x"}));
  EXPECT_EQ(refused.status, 2);
  const auto missing = run_command({"ckpt", "inspect", (root / "gone\xff").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("gone\\xff"));
}

TEST(UserFiles, HugeCountsAreEchoedAsGiven) {
  const auto root = fresh_folder("counts");
  expect_bad_input(train(root / "s", {"--keep", "18446744073709551617"}),
                   "--keep is '18446744073709551617'; expected an integer of at most 64 bits");
  expect_bad_input(train(root / "s", {"--save-every", "-1"}),
                   "--save-every is -1; expected 0 (the last step only) to --steps 4");
}

}  // namespace
}  // namespace shardwise::cli
