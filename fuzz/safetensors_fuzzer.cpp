// The header of a .safetensors file, as anything may have written it, for a file of 1 MiB of
// data: whatever is accepted places every tensor inside the data, holding exactly its shape's
// bytes, with no two tensors sharing a byte and no name twice.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "shardwise/core/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  constexpr std::uint64_t kDataBytes = std::uint64_t{1} << 20;
  fuzz::expect_only_errors([&] {
    const SafetensorsHeader header =
        parse_safetensors_header(fuzz::as_text(data, size), kDataBytes);
    fuzz::require(!header.tensors.empty());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;
    std::vector<std::string> names;
    for (const SafetensorsTensor& tensor : header.tensors) {
      fuzz::require(tensor.begin <= tensor.end && tensor.end <= kDataBytes);
      // The parser's checked product fits in 64 bits, so this unchecked one cannot wrap (or has
      // a zero factor either way).
      std::uint64_t bytes = size_in_bytes(tensor.dtype);
      for (const std::int64_t extent : tensor.shape) {
        fuzz::require(extent >= 0);
        bytes *= static_cast<std::uint64_t>(extent);
      }
      fuzz::require(tensor.end - tensor.begin == bytes);
      if (tensor.end > tensor.begin) extents.emplace_back(tensor.begin, tensor.end);
      names.push_back(tensor.name);
    }
    // Sorted by start, any two that share a byte include two neighbours that do.
    std::sort(extents.begin(), extents.end());
    for (std::size_t i = 1; i < extents.size(); ++i) {
      fuzz::require(extents[i].first >= extents[i - 1].second);
    }
    std::sort(names.begin(), names.end());
    fuzz::require(std::adjacent_find(names.begin(), names.end()) == names.end());
  });
  return 0;
}
