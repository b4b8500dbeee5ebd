// Every JSON loader of configurations and rules. The first byte picks the loader, the rest is
// the document; whatever loads writes JSON that loads to the same value.
#include "fuzz_input.hpp"
#include "shardwise/strategy/logical_axis_rules.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/parameter_rules.hpp"
#include "shardwise/strategy/sharding_config.hpp"
#include "shardwise/strategy/sharding_rules.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  if (size == 0) return 0;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  fuzz::expect_only_errors([&] {
    switch (data[0] % 5) {
      case 0: {
        const ShardingConfig config = ShardingConfig::from_json(text);
        fuzz::require(ShardingConfig::from_json(config.to_json()) == config);
        break;
      }
      case 1: {
        const ParallelismConfig config = ParallelismConfig::from_json(text);
        fuzz::require(ParallelismConfig::from_json(config.to_json()) == config);
        break;
      }
      case 2: {
        const LogicalAxisRules rules = LogicalAxisRules::from_json(text);
        fuzz::require(LogicalAxisRules::from_json(rules.to_json()).rules() == rules.rules());
        break;
      }
      case 3: {
        const ParameterNameRules rules = ParameterNameRules::from_json(text);
        (void)rules.logical_axes_for("model.layers.3.self_attn.q_proj.weight", 2);
        (void)rules.layer_index("model.layers.3.mlp.up_proj.weight");
        break;
      }
      default: {
        const ParallelismConfig config =
            ParallelismConfig::from_mesh(Mesh({"data", "fsdp", "model"}, {2, 2, 2}));
        (void)load_sharding_rules(text, config);
        break;
      }
    }
  });
  return 0;
}
