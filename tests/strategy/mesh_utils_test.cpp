#include "shardwise/strategy/mesh_utils.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.hpp"

namespace shardwise {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t p = 1;
  for (auto s : shape) p *= s;
  return p;
}

TEST(MeshUtils, ReferenceExpectations) {
  EXPECT_EQ(product(get_optimal_mesh_shape(8, 2)), 8);
  EXPECT_EQ(product(get_optimal_mesh_shape(16, 3)), 16);
  EXPECT_TRUE(validate_mesh_config({2, 4}, 8));
  EXPECT_FALSE(validate_mesh_config({3, 3}, 8));
}

TEST(MeshUtils, OptimalShapesAreBalancedAndExact) {
  EXPECT_THAT(get_optimal_mesh_shape(8, 2), ElementsAre(4, 2));
  EXPECT_THAT(get_optimal_mesh_shape(16, 3), ElementsAre(4, 2, 2));
  EXPECT_THAT(get_optimal_mesh_shape(12, 2), ElementsAre(4, 3));
  EXPECT_THAT(get_optimal_mesh_shape(64, 3), ElementsAre(4, 4, 4));
  EXPECT_THAT(get_optimal_mesh_shape(7, 2), ElementsAre(7, 1));
  EXPECT_THAT(get_optimal_mesh_shape(1, 3), ElementsAre(1, 1, 1));
  EXPECT_THAT(get_optimal_mesh_shape(10, 1), ElementsAre(10));
  for (std::int64_t n = 1; n <= 128; ++n) {
    for (std::int64_t d = 1; d <= 4; ++d) {
      const auto shape = get_optimal_mesh_shape(n, d);
      EXPECT_EQ(static_cast<std::int64_t>(shape.size()), d);
      EXPECT_EQ(product(shape), n);
      EXPECT_TRUE(std::is_sorted(shape.rbegin(), shape.rend()));
    }
  }
  EXPECT_THAT(error_of([] { (void)get_optimal_mesh_shape(0, 2); }), HasSubstr("device count is 0"));
  EXPECT_THAT(error_of([] { (void)get_optimal_mesh_shape(8, 0); }),
              HasSubstr("mesh dimensions is 0"));
}

TEST(MeshUtils, CheckMeshConfigSaysWhatIsWrong) {
  EXPECT_THAT(error_of([] {
                check_mesh_config({3, 3}, 8);
              }),
              HasSubstr("mesh shape (3, 3) has 9 devices, not 8"));
  EXPECT_THAT(error_of([] { check_mesh_config({0, 3}, 8); }), HasSubstr("size below 1"));
  EXPECT_THAT(error_of([] { check_mesh_config({}, 1); }), HasSubstr("mesh shape is empty"));
  EXPECT_FALSE(validate_mesh_config({}, 1));
  EXPECT_FALSE(validate_mesh_config({-1, -8}, 8));
}

TEST(MeshUtils, ManagerCreatesMeshesOverItsDevices) {
  const DeviceMeshManager manager(std::vector<DeviceId>{10, 11, 12, 13, 14, 15, 16, 17});
  const Mesh mesh = manager.create_mesh({2, 2}, {"data", "model"});
  EXPECT_THAT(mesh.device_ids(), ElementsAre(10, 11, 12, 13));
  EXPECT_THAT(error_of([&] {
                (void)manager.create_mesh({4, 4}, {"data", "model"});
              }),
              HasSubstr("mesh shape (4, 4) needs 16 devices but only 8 are available"));
  const ParallelismConfig config = ParallelismConfig::from_sharding_config(
      ShardingConfig{.data_parallel_size = 2, .tensor_parallel_size = 4});
  EXPECT_EQ(DeviceMeshManager(8).create_mesh_from_config(config).to_string(),
            "Mesh('data': 2, 'model': 4)");
  EXPECT_THAT(error_of([&] { (void)DeviceMeshManager(4).create_mesh_from_config(config); }),
              HasSubstr("needs 8 devices but only 4 are available"));
  EXPECT_THAT(error_of([] { DeviceMeshManager(0); }), HasSubstr("num_devices is 0"));
  EXPECT_THAT(error_of([] {
                DeviceMeshManager(std::vector<DeviceId>{1, 1});
              }),
              HasSubstr("device id 1 appears at positions 0 and 1"));
  EXPECT_EQ(create_device_mesh({2, 3}, {"a", "b"}).size(), 6);
}

// The reference's answers where they use every device; the largest divisor where they do not.
TEST(OptimizeForTransformer, ReferenceHeuristicWithExactProducts) {
  const auto shape = [](std::int64_t n, const std::string& size) {
    return optimize_for_transformer(n, size, 2048).config.mesh_shape;
  };
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(shape(8, "350M"), (Shape{8}));
  EXPECT_EQ(shape(16, "350M"), (Shape{8, 2}));  // the reference: (8, 16 // 8)
  EXPECT_EQ(shape(20, "125M"), (Shape{10, 2}));  // the reference: (8, 2), 16 of 20 devices
  EXPECT_EQ(shape(4, "7B"), (Shape{4}));
  EXPECT_EQ(shape(8, "7B"), (Shape{2, 4}));
  EXPECT_EQ(shape(6, "7B"), (Shape{2, 3}));  // the reference: tensor 3, data 2
  EXPECT_EQ(shape(10, "7b"), (Shape{5, 2}));  // the reference: tensor 4, data 2: 8 of 10
  EXPECT_EQ(shape(64, "70B"), (Shape{8, 8}));
  EXPECT_EQ(shape(12, "13B"), (Shape{2, 6}));
  EXPECT_EQ(shape(1, "70B"), (Shape{1}));
  EXPECT_EQ(shape(7, "70B"), (Shape{7}));  // a prime count: no tensor degree divides it
  for (std::int64_t n = 1; n <= 64; ++n) {
    for (const char* size : {"100M", "1.5B", "7B", "70B"}) {
      const auto suggestion = optimize_for_transformer(n, size, 1);
      EXPECT_EQ(suggestion.config.to_mesh().size(), n) << n << " " << size;
      EXPECT_THAT(suggestion.note, HasSubstr("heuristic"));
    }
  }
  EXPECT_EQ(optimize_for_transformer(8, "7B", 2048).config.mesh_axis_names,
            (std::vector<std::string>{"data", "model"}));
}

TEST(OptimizeForTransformer, BadInput) {
  EXPECT_THAT(error_of([] { (void)optimize_for_transformer(0, "7B", 1); }),
              HasSubstr("device count is 0"));
  EXPECT_THAT(error_of([] { (void)optimize_for_transformer(8, "7", 1); }),
              HasSubstr("model size '7' is not"));
  for (const char* bad : {"", "B", "-7B", "0B", "nanB", "infB", "1e999B", "7GB", "7 B"}) {
    EXPECT_THAT(error_of([&] { (void)optimize_for_transformer(8, bad, 1); }),
                HasSubstr("model size '" + std::string(bad) + "'"));
  }
  EXPECT_THAT(error_of([] { (void)optimize_for_transformer(8, "7B", 0); }),
              HasSubstr("sequence length is 0"));
}

}  // namespace
}  // namespace shardwise
