// `shardwise plan` from a .safetensors header on: the header parsed and checked, the model's
// shape read off it, and a search over every layout of 8 devices, which must rank at most what
// it was asked for and put a fitting layout first whenever one fits.
#include "fuzz_input.hpp"
#include "shardwise/plan/search.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  fuzz::expect_only_errors([&] {
    const ModelManifest manifest =
        plan::manifest_from_safetensors_header(fuzz::as_text(data, size), 1 << 20);
    const plan::ModelShape shape = plan::shape_of(manifest, 2);
    plan::TrainingSetup setup;
    setup.global_batch = 16;
    setup.seq = 128;
    plan::SearchOptions options;
    options.top = 3;
    const plan::SearchResult result =
        plan::search_layouts(shape, plan::Cluster::preset("h100-80gb", 8, 8), setup, options);
    fuzz::require(result.ranked.size() <= 3);
    fuzz::require(result.fitting == 0 || result.ranked.front().prediction.fits);
  });
  return 0;
}
