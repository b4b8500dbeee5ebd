// PartitionSpec::parse: parse(print(x)) == x, and a sharding of it over a small mesh either is
// refused or maps every device to an index inside the array.
#include "fuzz_input.hpp"
#include "shardwise/core/named_sharding.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  fuzz::expect_only_errors([&] {
    const PartitionSpec spec = PartitionSpec::parse(fuzz::as_text(data, size));
    fuzz::require(PartitionSpec::parse(spec.to_string()) == spec);
    const Mesh mesh({"data", "fsdp", "model"}, {2, 3, 4});
    const NamedSharding sharding(mesh, spec, Evenness::kUneven);
    const Shape shape{24, 7, 5};
    for (const DeviceShard& shard : sharding.devices_indices_map(shape)) {
      for (std::size_t d = 0; d < shape.size(); ++d) {
        fuzz::require(shard.index[d].start >= 0 && shard.index[d].stop <= shape[d]);
      }
    }
  });
  return 0;
}
