// Checkpoints to and from Hugging Face as library calls: a folder's weights imported over two
// ranks and exported again come back bit for bit, and every refusal names the setting as the
// caller names it.
#include "shardwise/models/hf_checkpoint.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "error_of.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/ckpt/safetensors_file.hpp"
#include "shardwise/comm/backend_registry.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/train/distributed_model.hpp"

namespace shardwise::models {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

// A Hugging Face folder of a small GPT-2: its config.json and model.safetensors, the trainer's
// values of seed 7 in Hugging Face's layout.
std::vector<std::vector<float>> write_hf_folder(const std::filesystem::path& folder,
                                                const std::shared_ptr<const GptDefinition>& model) {
  const HfAdapter& adapter = hf_adapter_named("hf-gpt2", "format");
  train::DistributedModel trained(model, 7);
  const train::ParameterStore& store = trained.parameters();
  std::vector<std::vector<float>> values;
  std::vector<ckpt::SafetensorsEntry> entries;
  for (std::size_t p = 0; p < store.specs().size(); ++p) {
    const train::ParameterSpec& spec = store.specs()[p];
    const float* first = store.values().data() + store.offset(p);
    const std::vector<float> whole(first, first + store.count(p));
    values.push_back(adapter.to_hf(spec.name, spec.shape, whole));
    entries.push_back({spec.name, DType::kF32, adapter.hf_shape(spec.name, spec.shape),
                       std::as_bytes(std::span<const float>(values.back()))});
  }
  std::filesystem::create_directories(folder);
  ckpt::write_safetensors_file(folder / "model.safetensors", entries, {{"format", "pt"}});
  std::ofstream(folder / "config.json") << adapter.hf_config_json(*model);
  return values;
}

TEST(HfCheckpoint, AnImportOverTwoRanksExportsBitForBit) {
  const std::filesystem::path root = ::testing::TempDir() + "hf_checkpoint_round_trip";
  std::filesystem::remove_all(root);
  const auto model = std::make_shared<const GptDefinition>(GptConfig{2, 2, 16, 16, 64});
  const std::vector<std::vector<float>> values = write_hf_folder(root / "hf", model);
  const BackendInfo& local = *find_backend("local");

  const HfImport import(
      {(root / "hf").string(), "hf-gpt2", std::nullopt, (root / "ckpt").string(), false, 2, {}});
  EXPECT_EQ(import.model()->config_json(), model->config_json());
  const std::optional<HfImportResult> imported = import.run(local);
  ASSERT_TRUE(imported.has_value());
  EXPECT_EQ(imported->ranks, 2);
  EXPECT_EQ(imported->parameters, values.size());

  const HfExportResult exported =
      export_to_hf({(root / "ckpt").string(), "hf-gpt2", (root / "out").string(), false, {}});
  EXPECT_EQ(exported.step, 0);
  EXPECT_EQ(exported.tensors, values.size());
  const ckpt::CheckpointReader back =
      ckpt::CheckpointReader::from_safetensors(root / "out" / "model.safetensors");
  const std::vector<train::ParameterSpec> specs = model->parameters();
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const ckpt::ArrayRecord* array = back.index().find(specs[p].name);
    ASSERT_NE(array, nullptr) << specs[p].name;
    std::vector<float> read(values[p].size());
    ShardIndex box;
    for (const std::int64_t size : array->shape) box.push_back({0, size});
    const ckpt::BlockToLoad target{array->name, array->shape, DType::kF32, box,
                                   std::as_writable_bytes(std::span<float>(read))};
    (void)back.read({&target, 1});
    EXPECT_EQ(read, values[p]) << specs[p].name;
  }

  // In bfloat16: every tensor the float32 export's rounded to nearest even, and config.json says
  // so, for transformers' torch_dtype="auto".
  HfExportSettings in_bf16{(root / "ckpt").string(), "hf-gpt2", (root / "out16").string()};
  in_bf16.dtype = DType::kBF16;
  EXPECT_EQ(export_to_hf(in_bf16).tensors, values.size());
  const ckpt::CheckpointReader narrow =
      ckpt::CheckpointReader::from_safetensors(root / "out16" / "model.safetensors");
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const ckpt::ArrayRecord* array = narrow.index().find(specs[p].name);
    ASSERT_NE(array, nullptr) << specs[p].name;
    EXPECT_EQ(array->dtype, DType::kBF16) << specs[p].name;
    std::vector<BFloat16> read(values[p].size());
    ShardIndex box;
    for (const std::int64_t size : array->shape) box.push_back({0, size});
    const ckpt::BlockToLoad target{array->name, array->shape, DType::kBF16, box,
                                   std::as_writable_bytes(std::span<BFloat16>(read))};
    (void)narrow.read({&target, 1});
    for (std::size_t i = 0; i < read.size(); ++i) {
      ASSERT_EQ(read[i], to_bfloat16(values[p][i])) << specs[p].name << " element " << i;
    }
  }
  std::ifstream config(root / "out16" / "config.json");
  const std::string config_text((std::istreambuf_iterator<char>(config)),
                                std::istreambuf_iterator<char>());
  EXPECT_THAT(config_text, HasSubstr("\"torch_dtype\": \"bfloat16\""));
  in_bf16.dtype = DType::kF16;
  in_bf16.out = (root / "out_f16").string();
  EXPECT_THAT(error_of([&] { (void)export_to_hf(in_bf16); }),
              HasSubstr("dtype is f16; an export writes float32 or bfloat16"));
  EXPECT_FALSE(std::filesystem::exists(root / "out_f16"));

  // A second import into the same place is refused, naming the settings as given.
  const train::SettingNames flags({{"out", "--out"}, {"force", "--force"}});
  EXPECT_THAT(error_of([&] {
                (void)HfImport({(root / "hf").string(), "hf-gpt2", std::nullopt,
                                (root / "ckpt").string(), false, 1, flags});
              }),
              HasSubstr("--out '" + (root / "ckpt").string() +
                        "' exists (an earlier import); it is left as it is; --force replaces it"));
  // A Hugging Face folder's own files are never replaced, even when forced.
  EXPECT_THAT(
      error_of([&] {
        (void)export_to_hf({(root / "ckpt").string(), "hf-gpt2", (root / "hf").string(), true, {}});
      }),
      HasSubstr("that ckpt export did not write"));
  std::filesystem::remove_all(root);
}

TEST(HfCheckpoint, RefusalsNameTheSettings) {
  EXPECT_THAT(error_of([] { (void)hf_adapter_named("hf-bert", "format"); }),
              HasSubstr("format is 'hf-bert'; expected hf-gpt2"));
  EXPECT_THAT(error_of([] {
                (void)export_to_hf({"x", "hf-gpt2", "", false, {}});
              }),
              HasSubstr("out is an empty path"));
  EXPECT_THAT(error_of([] {
                (void)HfImport({"x", "hf-gpt2", std::nullopt, "y", false, 0, {}});
              }),
              HasSubstr("ranks is 0"));
  EXPECT_THAT(error_of([] {
                (void)HfImport({"x", "hf-gpt2", "llama-tiny", "y", false, 1, {}});
              }),
              HasSubstr("model llama-tiny is a Llama"));
}

}  // namespace
}  // namespace shardwise::models
