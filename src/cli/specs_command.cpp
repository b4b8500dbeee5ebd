#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <ostream>

#include "command.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/models/model_resolution.hpp"
#include "shardwise/strategy/sharding_rules.hpp"
#include "shardwise/train/placement.hpp"
#include "specs_render.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

class SpecsCommand final : public Command {
 public:
  explicit SpecsCommand(CLI::App& parent)
      : app_(parent.add_subcommand(
            "specs",
            "Show how every parameter of a model is sharded on a mesh: logical axes, "
            "partition spec, shard shape, pipeline stage, and bytes per device")) {
    app_->add_option("--model", model_,
                     "A preset (" + models::preset_names() +
                         "), the trainer's model file, a model manifest (JSON with "
                         "\"parameters\"), a Hugging Face folder or "
                         "its config.json, or a .safetensors file")
        ->required();
    app_->add_option("--mesh", mesh_, "Mesh axes and sizes, e.g. data=2,fsdp=2,model=2,pipeline=2")
        ->required();
    app_->add_option(
        "--rules", rules_,
        "A rules file: logical_axis_rules, parameter_rules, stage_rules (each optional)");
    app_->add_flag("--fsdp", fsdp_on_data_,
                   "Shard parameters over 'data' (FSDP) when the mesh has no 'fsdp' axis");
    app_->add_option("--fsdp-min-weight-size", fsdp_min_weight_size_,
                     "FSDP leaves dimensions with fewer elements than this whole (the default "
                     "rules only)")
        ->default_val(ShardingConfig{}.fsdp_min_weight_size);
    app_->add_flag("--strict", strict_,
                   "Refuse the layout when an axis would be moved or dropped, a parameter has no "
                   "rule, or no rule gives its stage");
    app_->add_flag("--uneven", uneven_,
                   "Keep axes that do not divide a dimension (torch.chunk shards) instead of "
                   "dropping them");
    app_->add_flag("--json", json_, "Print one JSON object instead of the report");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  // The shard shapes, but a model's rows its model ranks share (train::SharedRows: replicated
  // key/value heads, which no PartitionSpec can place) as the trainer holds them, with a note.
  // The shared parameters are found by name: a Hugging Face config's manifest lists them in its
  // own order, not the family's.
  static std::vector<Shape> held_shapes(const models::ResolvedModel& argument,
                                        ModelLayout& layout) {
    std::vector<Shape> held;
    std::map<std::string, std::size_t> index;
    for (const ParameterLayout& p : layout.parameters) {
      index.emplace(p.parameter.name, held.size());
      held.push_back(p.shard_shape);
    }
    const int degree = train::model_degree(layout.mesh);
    const int experts = train::expert_degree(layout.mesh);
    if (!argument.model || (degree == 1 && experts == 1)) return held;
    try {
      (void)train::fixed_placements(*argument.model, degree, experts);
    } catch (const InvalidArgument& e) {
      // The strategies' split is shown; the trainer would refuse it (a Mixture of Experts).
      layout.notes.push_back(std::string("the trainer does not run this model on this mesh: ") +
                             e.what());
      return held;
    }
    std::vector<train::SharedRows> shared;
    try {
      shared = argument.model->shared_rows(degree);
    } catch (const InvalidArgument&) {
      return held;  // a degree the model cannot run: the layout's notes say what does not divide
    }
    const std::vector<train::ParameterSpec> parameters = argument.model->parameters();
    std::vector<std::string> names;
    for (const train::SharedRows& rows : shared) {
      const auto found = index.find(parameters.at(rows.parameter).name);
      if (found == index.end()) continue;
      Shape& shape = held[found->second];
      const auto blocks = static_cast<std::int64_t>(rows.blocks);
      // The trainer's block of rows; an axis that splits them too (FSDP's) splits that block.
      if (!shape.empty() && shape[0] % blocks == 0) shape[0] /= blocks;
      names.push_back(found->first);
    }
    if (!names.empty()) {
      const std::size_t blocks = shared.front().blocks;
      layout.notes.push_back(
          names.front() +
          (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "") +
          ": replicated key/value heads, which the trainer holds " +
          train::shared_rows_words(blocks, static_cast<std::size_t>(degree) / blocks) + ": " +
          to_string(held[index.at(names.front())]) + " a device (held_shape)");
    }
    return held;
  }

  void run(std::ostream& out) const override {
    const Mesh mesh = Mesh::parse(mesh_);
    // A model the trainer builds is laid out as the trainer holds it (its manifest: names,
    // (out, in) shapes, declared logical axes and head widths); a Hugging Face config.json as
    // the planner reads it (its dtype).
    const models::ResolvedModel argument = models::resolve_model(model_, "--model");
    const ModelManifest& manifest = argument.manifest;
    ParallelismConfig config = ParallelismConfig::from_mesh(mesh, fsdp_on_data_);
    config.sharding_config.fsdp_min_weight_size = fsdp_min_weight_size_;
    config.validate();
    const ShardingRules rules = rules_.empty()
                                    ? default_sharding_rules(config)
                                    : load_sharding_rules(read_file(rules_, "--rules"), config);
    LayoutOptions options;
    options.evenness = uneven_ ? Evenness::kUneven : Evenness::kStrict;
    options.strict = strict_;
    ModelLayout layout = layout_model(manifest, mesh, rules.axis_rules, rules.name_rules, options);
    if (rules.gives_parameter_rules &&
        std::all_of(manifest.parameters.begin(), manifest.parameters.end(),
                    [](const ParameterInfo& p) { return p.logical_axes.has_value(); })) {
      layout.notes.push_back(
          "parameter_rules are not used: every parameter of the model declares its logical "
          "axes");
    }
    const std::string fsdp_axis = config.sharding_config.fsdp_axis_name();
    if (rules_.empty() && mesh.has_axis(fsdp_axis) && mesh.axis_size(fsdp_axis) > 1 &&
        std::none_of(
            layout.parameters.begin(), layout.parameters.end(),
            [&](const ParameterLayout& p) { return p.spec.dimension_of(fsdp_axis) >= 0; })) {
      layout.axis_notes.push_back(
          "FSDP leaves whole every dimension below --fsdp-min-weight-size (" +
          std::to_string(fsdp_min_weight_size_) +
          "): give a smaller size to shard this model over '" + fsdp_axis + "'");
    }
    const std::vector<Shape> held = held_shapes(argument, layout);
    out << (json_ ? render_specs_json(layout, held) + "\n" : render_specs_text(layout));
  }

 private:
  CLI::App* app_;
  std::string model_;
  std::string mesh_;
  std::string rules_;
  bool fsdp_on_data_ = false;
  std::int64_t fsdp_min_weight_size_ = 0;
  bool strict_ = false;
  bool uneven_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_specs_command(CLI::App& parent) {
  return std::make_unique<SpecsCommand>(parent);
}

}  // namespace shardwise::cli
