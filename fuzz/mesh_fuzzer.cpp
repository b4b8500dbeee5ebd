// Mesh::parse: anything parsed prints back to text that parses to the same mesh.
#include "fuzz_input.hpp"
#include "shardwise/core/mesh.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  fuzz::expect_only_errors([&] {
    const Mesh mesh = Mesh::parse(fuzz::as_text(data, size));
    fuzz::require(Mesh::parse(mesh.to_string()) == mesh);
    fuzz::require(mesh.size() <= Mesh::kMaxDevices);
  });
  return 0;
}
