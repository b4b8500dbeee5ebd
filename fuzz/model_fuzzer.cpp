// `shardwise specs` end to end, from the model description on: a manifest or a Hugging Face
// config.json, laid out on a mesh with the default rules (strict and uneven), and rendered as
// the report and as JSON.
#include "fuzz_input.hpp"
#include "shardwise/strategy/model_layout.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "specs_render.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  fuzz::expect_only_errors([&] {
    const ModelManifest manifest = load_model_description(fuzz::as_text(data, size));
    fuzz::require(manifest.num_bytes() >= 0);
    const Mesh mesh({"data", "fsdp", "model", "pipeline"}, {2, 2, 2, 2});
    ParallelismConfig config = ParallelismConfig::from_mesh(mesh);
    config.sharding_config.fsdp_min_weight_size = 0;
    const ShardingRules rules = default_sharding_rules(config);
    for (const Evenness evenness : {Evenness::kStrict, Evenness::kUneven}) {
      LayoutOptions options;
      options.evenness = evenness;
      const ModelLayout layout =
          layout_model(manifest, mesh, rules.axis_rules, rules.name_rules, options);
      (void)cli::render_specs_text(layout);
      (void)cli::render_specs_json(layout);
    }
  });
  return 0;
}
