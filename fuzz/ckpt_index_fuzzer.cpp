// A checkpoint's index.json, as anything may have written it: parsed and checked (names, shapes,
// the shards' grid, their bytes, checksum counts, file names). Whatever is accepted is written
// back out and must read again to the same arrays and bytes, so that every index a save can
// write a load can read.
#include "fuzz_input.hpp"
#include "shardwise/ckpt/checkpoint_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  fuzz::expect_only_errors([&] {
    const ckpt::CheckpointIndex index =
        ckpt::parse_checkpoint_index(fuzz::as_text(data, size), "index.json");
    // From here on an Error is a finding, not an answer: expect_only_errors would swallow it.
    try {
      ckpt::check_consistent(index, "parsed index");
      const std::string text = ckpt::checkpoint_index_json(index);
      const ckpt::CheckpointIndex again = ckpt::parse_checkpoint_index(text, "written index");
      fuzz::require(again.arrays.size() == index.arrays.size());
      fuzz::require(again.total_bytes() == index.total_bytes());
      fuzz::require(again.metadata_json == index.metadata_json);
      for (const ckpt::ArrayRecord& array : index.arrays) {
        fuzz::require(index.find(array.name) == &array);
      }
      // Written again, the text is the same: nothing is lost or reordered on the way.
      fuzz::require(ckpt::checkpoint_index_json(again) == text);
    } catch (const Error&) {
      fuzz::require(false);
    }
  });
  return 0;
}
