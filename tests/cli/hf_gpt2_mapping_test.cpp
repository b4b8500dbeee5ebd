// The GPT's parameters in Hugging Face GPT-2's layout and back, by values: every parameter's
// every block read from an exported file equals the trainer's values (a square weight loaded
// without its transpose would pass every shape check, not this one); and import -> export gives
// the same file byte for byte, on any number of ranks (no PyTorch needed).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>

#include "run_command.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/models/hf_gpt2.hpp"

namespace shardwise::cli {
namespace {
using namespace shardwise::models;  // NOLINT: the mapping under test

using testing::run_command;
using testing::source_path;

TEST(HfGpt2Mapping, EveryBlockReadBackIsTheTrainersValues) {
  const models::GptConfig gpt{2, 2, 8, 4, 16};
  const auto specs = models::gpt_parameters(gpt);
  // Each parameter's value: its global index, and which parameter (distinct everywhere).
  std::vector<std::vector<float>> ours;
  std::vector<std::vector<float>> theirs;
  std::vector<ckpt::SafetensorsEntry> entries;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    std::vector<float> values(static_cast<std::size_t>(num_elements(specs[p].shape)));
    std::iota(values.begin(), values.end(), static_cast<float>(1000 * p));
    ours.push_back(values);
    theirs.push_back(to_hf_gpt2(specs[p].name, specs[p].shape, values));
  }
  // Hugging Face's Conv1D keeps (in, out), y = x W; the trainer (out, in), y = x W^T; and its
  // c_attn puts Q, K and V side by side: [in][q * C + out]. Checked element by element, so that
  // a square weight (attn.c_proj) cannot pass untransposed.
  const std::int64_t c = static_cast<std::int64_t>(gpt.n_embd);
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const std::string& name = specs[p].name;
    const Shape& shape = specs[p].shape;
    const auto at = [&](const std::vector<float>& v, std::int64_t i) {
      return v[static_cast<std::size_t>(i)];
    };
    if (name.ends_with("attn.c_attn.weight")) {
      for (std::int64_t q = 0; q < 3; ++q) {
        for (std::int64_t o = 0; o < c; ++o) {
          for (std::int64_t i = 0; i < c; ++i) {
            ASSERT_EQ(at(theirs[p], i * 3 * c + q * c + o), at(ours[p], (q * c + o) * c + i));
          }
        }
      }
    } else if (name.ends_with("attn.c_proj.weight") || name.ends_with("mlp.c_fc.weight") ||
               name.ends_with("mlp.c_proj.weight")) {
      const std::int64_t out = shape[0];
      const std::int64_t in = shape[1];
      for (std::int64_t o = 0; o < out; ++o) {
        for (std::int64_t i = 0; i < in; ++i) {
          ASSERT_EQ(at(theirs[p], i * out + o), at(ours[p], o * in + i)) << name;
        }
      }
    } else {
      EXPECT_EQ(theirs[p], ours[p]) << name;
    }
  }
  for (std::size_t p = 0; p < specs.size(); ++p) {
    entries.push_back({specs[p].name, DType::kF32, hf_gpt2_shape(specs[p].name, specs[p].shape),
                       std::as_bytes(std::span<const float>(theirs[p]))});
  }
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "hf_mapping.safetensors";
  std::filesystem::remove(file);
  ckpt::write_safetensors_file(file, entries, {{"format", "pt"}});
  const auto reader = ckpt::CheckpointReader::from_safetensors(file);
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const Shape& shape = specs[p].shape;
    // The whole parameter, and a block cut along every dimension (as a rank's import reads).
    std::vector<ShardIndex> boxes{{}};
    ShardIndex inner;
    for (const std::int64_t size : shape) {
      boxes[0].push_back({0, size});
      inner.push_back({size > 1 ? 1 : 0, size});
    }
    boxes.push_back(inner);
    for (const ShardIndex& box : boxes) {
      std::vector<float> got(static_cast<std::size_t>(num_elements(shape_of(box))));
      read_hf_gpt2_block(reader, specs[p].name, specs[p].name, shape, box, got.data());
      // The expected block of our values, row-major.
      std::vector<float> expected;
      std::vector<std::int64_t> index(box.size());
      for (std::size_t d = 0; d < box.size(); ++d) index[d] = box[d].start;
      for (std::size_t n = 0; n < got.size(); ++n) {
        std::int64_t flat = 0;
        for (std::size_t d = 0; d < box.size(); ++d) flat = flat * shape[d] + index[d];
        expected.push_back(ours[p][static_cast<std::size_t>(flat)]);
        for (std::size_t d = box.size(); d-- > 0;) {
          if (++index[d] < box[d].stop) break;
          index[d] = box[d].start;
        }
      }
      EXPECT_EQ(got, expected) << specs[p].name << " " << to_string(box);
    }
  }
}

std::string bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(HfGpt2Mapping, ImportThenExportGivesTheSameFile) {
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / "hf_mapping_round_trip";
  std::filesystem::remove_all(root);
  ASSERT_EQ(
      run_command({"train", "--model", source_path("examples/models/gpt_micro.json"), "--steps",
                   "3", "--batch", "4", "--mesh", "model=2", "--save", (root / "ck").string()})
          .status,
      0);
  ASSERT_EQ(run_command({"ckpt", "export", (root / "ck").string(), "--format", "hf-gpt2", "--out",
                         (root / "hf").string()})
                .status,
            0);
  for (const char* ranks : {"1", "3"}) {
    const std::string in = (root / (std::string("in") + ranks)).string();
    const std::string out = (root / (std::string("out") + ranks)).string();
    ASSERT_EQ(run_command({"ckpt", "import", (root / "hf").string(), "--format", "hf-gpt2", "--out",
                           in, "--ranks", ranks})
                  .status,
              0);
    ASSERT_EQ(run_command({"ckpt", "export", in, "--format", "hf-gpt2", "--out", out}).status, 0);
    EXPECT_EQ(bytes_of(root / "hf" / "model.safetensors"),
              bytes_of(std::filesystem::path(out) / "model.safetensors"))
        << ranks << " ranks";
    EXPECT_EQ(bytes_of(root / "hf" / "config.json"),
              bytes_of(std::filesystem::path(out) / "config.json"));
  }
}

}  // namespace
}  // namespace shardwise::cli
