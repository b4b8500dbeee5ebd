#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "shardwise/strategy/parallelism_config.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

TEST(ShardingConfig, DefaultsAndTotal) {
  ShardingConfig config;
  EXPECT_EQ(config.get_total_device_count(), 1);
  EXPECT_EQ(config.fsdp_min_weight_size, 1024);
  EXPECT_FALSE(config.fsdp_enabled);
  EXPECT_EQ((ShardingConfig{2, 4, 2}).get_total_device_count(), 16);
  ShardingConfig hsdp{.data_parallel_size = 2,
                      .tensor_parallel_size = 2,
                      .fsdp_enabled = true,
                      .fsdp_parallel_size = 4};
  EXPECT_EQ(hsdp.get_total_device_count(), 16);
  EXPECT_EQ(hsdp.fsdp_axis_name(), "fsdp");
  EXPECT_EQ((ShardingConfig{.fsdp_enabled = true}).fsdp_axis_name(), "data");
}

TEST(ShardingConfig, FromDeviceCountKeepsExactReferenceAnswers) {
  auto degrees = [](std::int64_t n) {
    const ShardingConfig c = ShardingConfig::from_device_count(n);
    return std::vector<std::int64_t>{c.data_parallel_size, c.tensor_parallel_size,
                                     c.pipeline_parallel_size};
  };
  EXPECT_THAT(degrees(1), ElementsAre(1, 1, 1));
  EXPECT_THAT(degrees(3), ElementsAre(3, 1, 1));
  EXPECT_THAT(degrees(4), ElementsAre(4, 1, 1));
  EXPECT_THAT(degrees(8), ElementsAre(2, 4, 1));
  EXPECT_THAT(degrees(16), ElementsAre(4, 4, 1));    // sqrt 4
  EXPECT_THAT(degrees(64), ElementsAre(8, 8, 1));    // min(8, 8)
  EXPECT_THAT(degrees(256), ElementsAre(32, 8, 1));  // min(8, 16)
  // Where the reference would leave devices idle (10 -> 3 x 3 = 9), the product is exact.
  EXPECT_THAT(degrees(10), ElementsAre(5, 2, 1));
  EXPECT_THAT(degrees(7), ElementsAre(7, 1, 1));
  for (std::int64_t n = 1; n <= 300; ++n) {
    EXPECT_EQ(ShardingConfig::from_device_count(n).get_total_device_count(), n) << n;
  }
}

TEST(ShardingConfig, FromDeviceCountRejectsNonPositive) {
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_device_count(0); }),
              HasSubstr("device count is 0; expected at least 1"));
  EXPECT_THROW((void)ShardingConfig::from_device_count(-4), InvalidArgument);
}

TEST(ShardingConfig, ValidationNamesTheField) {
  EXPECT_THAT(error_of([] { ShardingConfig{0}.validate(); }),
              HasSubstr("ShardingConfig.data_parallel_size is 0; expected a size >= 1"));
  EXPECT_THAT(error_of([] {
                ShardingConfig{1, -2}.validate();
              }),
              HasSubstr("tensor_parallel_size is -2"));
  EXPECT_THAT(error_of([] {
                ShardingConfig{1, 1, 0}.validate();
              }),
              HasSubstr("pipeline_parallel_size is 0"));
  EXPECT_THAT(error_of([] { (ShardingConfig{.fsdp_min_weight_size = -1}).validate(); }),
              HasSubstr("fsdp_min_weight_size is -1"));
  EXPECT_THAT(error_of([] { (ShardingConfig{.fsdp_parallel_size = 2}).validate(); }),
              HasSubstr("fsdp_parallel_size is 2 but fsdp_enabled is false"));
}

TEST(ShardingConfig, JsonRoundTripAndStrictness) {
  ShardingConfig config{.data_parallel_size = 2,
                        .tensor_parallel_size = 4,
                        .fsdp_enabled = true,
                        .fsdp_min_weight_size = 512,
                        .fsdp_parallel_size = 2};
  EXPECT_EQ(ShardingConfig::from_json(config.to_json()), config);
  EXPECT_EQ(ShardingConfig::from_json(R"({"data_parallel_size": 4})").data_parallel_size, 4);
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json(R"({"data_paralel_size": 4})"); }),
              HasSubstr("unknown field 'data_paralel_size'"));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json(R"({"fsdp_enabled": 1})"); }),
              HasSubstr("field 'fsdp_enabled' must be true or false, not integer"));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json(R"({"tensor_parallel_size": 2.5})"); }),
              HasSubstr("field 'tensor_parallel_size' must be an integer, not number 2.5"));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json(R"({"data_parallel_size": 0})"); }),
              HasSubstr("data_parallel_size is 0"));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json("[1]"); }),
              HasSubstr("the document must be a JSON object, not array"));
  EXPECT_THAT(error_of([] { (void)ShardingConfig::from_json("{"); }),
              HasSubstr("invalid JSON in sharding config"));
}

TEST(ParallelismConfig, ReferenceValidity) {
  ParallelismConfig config{{2, 4}, {"data", "model"}, ShardingConfig{2, 4}};
  EXPECT_TRUE(config.is_valid());
  EXPECT_FALSE((ParallelismConfig{{2, 2}, {"data", "model"}, ShardingConfig{2, 4}}).is_valid());
}

TEST(ParallelismConfig, ValidationNamesTheField) {
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{2, 4}, {"data"}, ShardingConfig{2, 4}}.validate();
              }),
              HasSubstr("mesh_shape has 2 sizes but mesh_axis_names has 1 names"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{2, 4}, {"data", "data"}, ShardingConfig{2, 4}}.validate();
              }),
              HasSubstr("'data' is used by axes 0 and 1"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{2, 2}, {"data", "model"}, ShardingConfig{2, 4}}.validate();
              }),
              HasSubstr("mesh_shape (2, 2) has 4 devices but ShardingConfig(data=2, fsdp=1, "
                        "tensor=4, pipeline=1, fsdp_enabled=false, fsdp_min_weight_size=1024) "
                        "needs 8"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{4, 2}, {"data", "model"}, ShardingConfig{2, 4}}.validate();
              }),
              HasSubstr("mesh axis 'data' has size 4 but sharding_config.data_parallel_size is 2"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{2, 4}, {"data", "tensor"}, ShardingConfig{2, 4}}.validate();
              }),
              HasSubstr("has no 'model' axis for sharding_config.tensor_parallel_size = 4"));
  EXPECT_THAT(error_of([] {
                ParallelismConfig{{8}, {"data"}, ShardingConfig{0}}.validate();
              }),
              HasSubstr("data_parallel_size is 0"));
}

TEST(ParallelismConfig, FromShardingConfigPutsTensorInnermost) {
  ParallelismConfig reference = ParallelismConfig::from_sharding_config(ShardingConfig{2, 4});
  EXPECT_THAT(reference.mesh_shape, ElementsAre(2, 4));
  EXPECT_THAT(reference.mesh_axis_names, ElementsAre("data", "model"));
  ParallelismConfig all =
      ParallelismConfig::from_sharding_config(ShardingConfig{.data_parallel_size = 2,
                                                             .tensor_parallel_size = 2,
                                                             .pipeline_parallel_size = 2,
                                                             .fsdp_enabled = true,
                                                             .fsdp_parallel_size = 2});
  EXPECT_THAT(all.mesh_axis_names, ElementsAre("pipeline", "data", "fsdp", "model"));
  EXPECT_TRUE(all.is_valid());
  ParallelismConfig single = ParallelismConfig::from_sharding_config(ShardingConfig{});
  EXPECT_THAT(single.mesh_shape, ElementsAre(1));
  EXPECT_THAT(single.mesh_axis_names, ElementsAre("data"));
  EXPECT_EQ(all.to_mesh().to_string(), "Mesh('pipeline': 2, 'data': 2, 'fsdp': 2, 'model': 2)");
}

TEST(ParallelismConfig, JsonRoundTripAndErrors) {
  ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 2});
  EXPECT_EQ(ParallelismConfig::from_json(config.to_json()), config);
  EXPECT_EQ(
      config.to_json(),
      R"({"mesh_shape":[2,2],"mesh_axis_names":["data","model"],"sharding_config":{"data_parallel_size":2,"tensor_parallel_size":2,"pipeline_parallel_size":1,"fsdp_enabled":false,"fsdp_min_weight_size":1024,"fsdp_parallel_size":1}})");
  EXPECT_THAT(
      error_of([] {
        (void)ParallelismConfig::from_json(
            R"({"mesh_shape": [2], "mesh_axis_names": ["data"], "sharding_config": {"data_parallel_size": 2, "colour": 1}})");
      }),
      HasSubstr("unknown field 'sharding_config.colour'"));
  EXPECT_THAT(
      error_of([] { (void)ParallelismConfig::from_json(R"({"mesh_axis_names": ["data"]})"); }),
      HasSubstr("missing required field 'mesh_shape'"));
  EXPECT_THAT(error_of([] {
                (void)ParallelismConfig::from_json(
                    R"({"mesh_shape": [2, "x"], "mesh_axis_names": ["data", "model"]})");
              }),
              HasSubstr("field 'mesh_shape[1]' must be an integer, not string \"x\""));
}

}  // namespace
}  // namespace shardwise
