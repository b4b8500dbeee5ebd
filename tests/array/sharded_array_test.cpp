// ShardedArray over storage it does not own, its element-type checks and dtype casts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "error_of.hpp"
#include "shardwise/array/placement_ops.hpp"
#include "shardwise/comm/run_local.hpp"

namespace shardwise {
namespace {

using testing::error_of;
using ::testing::HasSubstr;

std::span<std::byte> bytes_of(std::vector<float>& values, std::size_t begin, std::size_t count) {
  return {reinterpret_cast<std::byte*>(values.data() + begin), count * sizeof(float)};
}

// A flat buffer holds two parameters' shards back to back; resharding into a view writes there.
TEST(ShardedArrayView, ReshardWritesIntoAFlatBuffer) {
  run_local(4, [](Communicator& comm) {
    const Mesh mesh({"data", "model"}, {2, 2});
    const Shape shape{8, 4};
    std::vector<float> host(32);
    std::iota(host.begin(), host.end(), 0.0F);
    // Each rank's shard of P('data', 'model') is 4 x 2 = 8 elements; the flat buffer holds a
    // 4-element header, then the shard, then 4 more.
    std::vector<float> flat(16, -1.0F);
    ShardedArray target = ShardedArray::view(NamedSharding(mesh, P{"data", "model"}), shape,
                                             DType::kF32, comm.rank(), bytes_of(flat, 4, 8));
    EXPECT_TRUE(target.is_view());
    const ShardedArray source =
        shard_replicated(comm, host.data(), shape, DType::kF32, NamedSharding(mesh, P()));
    reshard_into(comm, source, target);
    const std::int64_t row0 = mesh.coords_of(comm.rank())[0] * 4;
    const std::int64_t col0 = mesh.coords_of(comm.rank())[1] * 2;
    for (std::size_t i = 0; i < 8; ++i) {
      const auto row = static_cast<std::int64_t>(i / 2) + row0;
      const auto col = static_cast<std::int64_t>(i % 2) + col0;
      EXPECT_EQ(flat[4 + i], static_cast<float>(row * 4 + col));
    }
    for (std::size_t i : {0U, 3U, 12U, 15U}) EXPECT_EQ(flat[i], -1.0F);
    // A copy of a view is a view of the same storage; a copy of an owned array owns a copy.
    ShardedArray copy = target;
    EXPECT_TRUE(copy.is_view());
    copy.local<float>()[0] = 99.0F;
    EXPECT_EQ(flat[4], 99.0F);
    ShardedArray owned = source;
    EXPECT_FALSE(owned.is_view());
    EXPECT_NE(owned.local_bytes().data(), source.local_bytes().data());
    ShardedArray moved = std::move(owned);
    EXPECT_EQ(moved.local<float>()[5], 5.0F);
  });
}

TEST(ShardedArrayView, StorageMustHoldTheBlockExactly) {
  std::vector<float> flat(10);
  const Mesh mesh({"data"}, {2});
  EXPECT_THAT(error_of([&] {
                (void)ShardedArray::view(NamedSharding(mesh, P{"data"}), {8}, DType::kF32, 0,
                                         bytes_of(flat, 0, 5));
              }),
              HasSubstr("needs 16 bytes, got 20"));
}

TEST(ShardedArray, LocalChecksTheElementType) {
  const Mesh mesh({"data"}, {1});
  const ShardedArray array(NamedSharding(mesh, P()), {4}, DType::kBF16, 0,
                           std::vector<std::byte>(8));
  EXPECT_EQ(array.local<BFloat16>().size(), 4U);
  EXPECT_THAT(error_of([&] { (void)array.local<float>(); }),
              HasSubstr("local<f32>() of ShardedArray((4,) bf16"));
  EXPECT_THAT(error_of([&] { (void)array.local<Float16>(); }), HasSubstr("local<f16>()"));
  const ShardedArray flags(NamedSharding(mesh, P()), {3}, DType::kBool, 0,
                           std::vector<std::byte>(3));
  EXPECT_EQ(flags.local<bool>().size(), 3U);
  EXPECT_THAT(error_of([&] { (void)flags.local<std::uint8_t>(); }), HasSubstr("local<u8>()"));
}

TEST(ShardedArray, CastsBetweenFloatingTypes) {
  const Mesh mesh({"data"}, {1});
  const std::vector<float> values{1.0F, -2.5F, 3.140625F, 65504.0F, 1e-3F};
  std::vector<std::byte> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const ShardedArray f32(NamedSharding(mesh, P()), {5}, DType::kF32, 0, bytes);
  const ShardedArray bf16 = cast(f32, DType::kBF16);
  const ShardedArray f16 = cast(f32, DType::kF16);
  const ShardedArray f64 = cast(f16, DType::kF64);
  EXPECT_EQ(bf16.dtype(), DType::kBF16);
  EXPECT_EQ(to_float(bf16.local<BFloat16>()[2]), 3.140625F);  // exact in bf16
  EXPECT_EQ(to_float(f16.local<Float16>()[3]), 65504.0F);     // f16's largest
  EXPECT_EQ(f64.local<double>()[1], -2.5);
  // Rounding to nearest: 1e-3 is not a bf16 value.
  EXPECT_NEAR(to_float(bf16.local<BFloat16>()[4]), 1e-3F, 1e-5F);
  const ShardedArray back = cast(bf16, DType::kF32);
  EXPECT_EQ(back.local<float>()[0], 1.0F);
  const ShardedArray ints(NamedSharding(mesh, P()), {2}, DType::kI32, 0, std::vector<std::byte>(8));
  EXPECT_THAT(error_of([&] { (void)cast(ints, DType::kF32); }),
              HasSubstr("cast from i32 to f32: casts are between f32, f64, bf16 and f16"));
}

}  // namespace
}  // namespace shardwise
