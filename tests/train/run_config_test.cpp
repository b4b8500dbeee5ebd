// A run's config.json read back by setting: every setting the writer keeps comes back as the text
// its setting takes, what it leaves out or holds null is absent, and a wrong type or value is
// refused naming its key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "error_of.hpp"
#include "shardwise/train/run_config.hpp"

namespace shardwise::train {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

nlohmann::json written() {
  return nlohmann::json::parse(R"({
    "command": "shardwise train",
    "model": {"given": "llama-tiny", "family": "llama", "config": {"hidden_size": 128}},
    "mesh": {"axes": [{"name": "data", "size": 2}, {"name": "pipeline", "size": 2}],
             "threads_per_rank": 0},
    "settings": {"zero": 1, "steps": 40, "batch": 16, "seq": 32, "learning_rate": 0.002,
                 "min_learning_rate_ratio": 0.05, "warmup": 4, "beta1": 0.8, "beta2": 0.99,
                 "weight_decay": 0.01, "grad_clip": 0.5, "seed": 7, "overlap": false,
                 "eval_every": 10, "sequence_parallel": false, "recompute": "full",
                 "param_sharding": "first-dim", "caller": {"--json": "on"}},
    "pipeline": {"schedule": "gpipe", "microbatches": 4, "virtual_stages": 1,
                 "layers_per_virtual_stage": [2, 2], "stages_by": "cost"},
    "checkpoints": {"save": "runs/a", "save_every": 10, "keep": 2, "save_async": true,
                    "resume": null, "init_from": null},
    "data": {"train": {"path": "text.txt", "tokens": 100},
             "validation": {"held_out": "the last tenth of the training data", "tokens": 10},
             "format": "text", "tokenizer": null}})");
}

TEST(RunConfig, EverySettingComesBackByName) {
  const RunConfig c = read_run_config(written().dump(), "config.json");
  const std::map<std::string, std::string> expected{{"model", "llama-tiny"},
                                                    {"mesh", "data=2,pipeline=2"},
                                                    {"zero", "1"},
                                                    {"steps", "40"},
                                                    {"batch", "16"},
                                                    {"seq", "32"},
                                                    {"learning_rate", "0.002"},
                                                    {"warmup", "4"},
                                                    {"seed", "7"},
                                                    {"eval_every", "10"},
                                                    {"recompute", "full"},
                                                    {"param_sharding", "first-dim"},
                                                    {"no_overlap", "true"},
                                                    {"schedule", "gpipe"},
                                                    {"microbatches", "4"},
                                                    {"virtual_stages", "1"},
                                                    {"stages_by", "cost"},
                                                    {"data", "text.txt"},
                                                    {"data_format", "text"},
                                                    {"save", "runs/a"},
                                                    {"save_every", "10"},
                                                    {"keep", "2"},
                                                    {"save_async", "true"}};
  EXPECT_EQ(c.settings, expected);
  EXPECT_EQ(nlohmann::json::parse(c.model_config),
            nlohmann::json::parse(R"({"family": "llama", "hidden_size": 128})"));
  TrainSettings settings;
  apply_optimizer_settings(c, settings);
  EXPECT_FLOAT_EQ(settings.min_learning_rate_ratio, 0.05F);
  EXPECT_FLOAT_EQ(settings.beta1, 0.8F);
  EXPECT_FLOAT_EQ(settings.beta2, 0.99F);
  EXPECT_FLOAT_EQ(settings.weight_decay, 0.01F);
  EXPECT_FLOAT_EQ(settings.grad_clip, 0.5F);
}

TEST(RunConfig, TheBuiltInCorpusAndNullsAreAbsent) {
  nlohmann::json j = written();
  j["data"]["train"]["path"] = "built-in";
  j["pipeline"] = nullptr;
  j["settings"]["overlap"] = true;
  const RunConfig c = read_run_config(j.dump(), "config.json");
  for (const char* absent : {"data", "schedule", "microbatches", "no_overlap", "resume",
                             "init_from", "tokenizer", "val_data", "threads"}) {
    EXPECT_EQ(c.settings.count(absent), 0U) << absent;
  }
}

TEST(RunConfig, AWrongTypeOrValueIsRefusedNamingItsKey) {
  const auto refusal = [](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = written();
    nlohmann::json* at = &j;
    std::size_t start = 0;
    for (std::size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
      at = &(*at)[key.substr(start, dot - start)];
      start = dot + 1;
    }
    (*at)[key.substr(start)] = value;
    return error_of([&] { (void)read_run_config(j.dump(), "'run.json'"); });
  };
  EXPECT_THAT(refusal("settings.batch", "16"),
              HasSubstr("'run.json': \"settings.batch\" is \"16\"; expected an integer"));
  EXPECT_THAT(refusal("settings.steps", -3), HasSubstr("\"settings.steps\" is -3"));
  EXPECT_THAT(refusal("settings.beta1", "x"), HasSubstr("\"settings.beta1\" is \"x\""));
  EXPECT_THAT(refusal("settings.overlap", 1), HasSubstr("expected true or false"));
  EXPECT_THAT(refusal("mesh.axes", nlohmann::json::array({{{"name", "data"}, {"size", 0}}})),
              HasSubstr("\"mesh.axes\""));
  EXPECT_THAT(refusal("model.config", 3), HasSubstr("\"model.config\" is 3"));
  EXPECT_THAT(error_of([] { (void)read_run_config("[1, 2]", "'run.json'"); }),
              HasSubstr("'run.json': not a run's config.json"));
  EXPECT_THAT(error_of([] { (void)read_run_config("{", "'run.json'"); }), HasSubstr("'run.json'"));
}

}  // namespace
}  // namespace shardwise::train
