// Where does each device's block of an 8 x 16 array live on a 2 x 4 mesh?
#include <iostream>
#include <shardwise/shardwise.hpp>

int main() {
  using namespace shardwise;
  const Mesh mesh = Mesh::parse("data=2,model=4");
  const NamedSharding sharding(mesh, P{"data", "model"});
  const Shape shape{8, 16};
  std::cout << sharding.to_string() << " on " << to_string(shape) << "\n";
  for (const DeviceShard& shard : sharding.devices_indices_map(shape)) {
    std::cout << "device " << shard.device << " holds " << to_string(shard.index) << "\n";
  }
  return 0;
}
