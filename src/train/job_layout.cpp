#include "shardwise/train/job_layout.hpp"

#include <set>

#include "../detail/text_format.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/named_sharding.hpp"
#include "shardwise/strategy/fsdp_strategy.hpp"
#include "shardwise/strategy/parallelism_config.hpp"
#include "shardwise/strategy/pipeline_schedule.hpp"
#include "shardwise/train/placement.hpp"

namespace shardwise::train {
namespace {

// How ZeRO splits each block, as `source` asks (the rules where a file gave them).
ParameterShardings zero_shardings(const std::string& source, const SettingNames& named,
                                  const std::vector<ParameterSpec>& blocks, const Mesh& mesh,
                                  const std::optional<ShardingRules>& rules) {
  const std::string shard_axis = ParallelContext::shard_axis_of(mesh);
  const std::string axis = shard_axis.empty() ? "fsdp" : shard_axis;
  const std::int64_t size = shard_axis.empty() ? 1 : mesh.axis_size(axis);
  if (!rules) {
    if (source == "first-dim") return default_shardings(blocks, axis, size);
    if (source == "logical-axes") {
      return fsdp_shardings(blocks, FSDPStrategy::splitting_every_parameter(axis), size,
                            FsdpSplit::kLogicalAxes);
    }
    throw InvalidArgument(named("param_sharding") + " is '" + echo_input(source) +
                          "'; expected first-dim, logical-axes or a rules file");
  }
  try {
    // ZeRO's layout is the rules' over the data-parallel axes, applied to the blocks.
    const Mesh zero_mesh = shard_axis.empty() ? Mesh({axis}, {1}) : mesh;
    return rules_shardings(blocks, zero_mesh, axis, rules->axis_rules, rules->name_rules);
  } catch (const Error& e) {
    throw InvalidArgument(named("param_sharding") + " '" + source + "': " + e.what());
  }
}

// A rules file's parts the job cannot use, refused rather than ignored.
void check_file_rules(const ShardingRules& rules, const std::string& source,
                      const SettingNames& named) {
  if (rules.gives_parameter_rules) {
    throw InvalidArgument(
        named("param_sharding") + " '" + source +
        "': parameter_rules give logical axes to parameters that declare none, "
        "and every parameter of the model declares its own (`shardwise specs --model M` shows "
        "them); map its logical axes with logical_axis_rules "
        "instead");
  }
  if (rules.gives_stage_rules) {
    throw InvalidArgument(named("param_sharding") + " '" + source +
                          "': stage_rules place parameters in pipeline stages, and the training "
                          "job assigns the model's layers to stages itself (" +
                          named("stages_by") +
                          " count or "
                          "cost)");
  }
}

std::string layer_span(const LayerRange& range) {
  return range.size() == 1 ? "layer " + std::to_string(range.first_layer)
                           : "layers " + std::to_string(range.first_layer) + "-" +
                                 std::to_string(range.end_layer - 1);
}

std::string ranks_text(const std::vector<std::int64_t>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 8) text += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return (ranks.size() > 1 ? "ranks " : "rank ") + text;
}

}  // namespace

JobLayout resolve_job_layout(const ModelDefinition& model, const Mesh& mesh, int zero,
                             const std::string& param_sharding,
                             const std::optional<ShardingRules>& file_rules,
                             const SettingNames& named) {
  if (file_rules) check_file_rules(*file_rules, param_sharding, named);
  // The model axis splits each parameter for good (the rules': those of a rules file, else the
  // strategies'); ZeRO splits the block further as param_sharding says.
  const ShardingRules defaults = default_sharding_rules(ParallelismConfig::from_mesh(mesh));
  const ShardingRules& rules = file_rules ? *file_rules : defaults;
  const std::vector<ParameterSpec> whole = model.parameters();
  JobLayout layout;
  try {
    // What the layers need first: its refusals say why, where the rules' layout could only
    // differ from it.
    const int degree = model_degree(mesh);
    (void)fixed_placements(model, degree, expert_degree(mesh));
    layout.placements =
        model_placements(model.manifest(), mesh, rules.axis_rules, rules.name_rules);
    check_model_placements(model, degree, expert_degree(mesh), layout.placements);
    layout.blocks = local_parameters(whole, mesh, 0, layout.placements, model.shared_rows(degree));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(named("mesh") + " " + mesh.to_string() + ": " + e.what());
  }
  if (zero > 0) {
    layout.shardings = zero_shardings(param_sharding, named, layout.blocks, mesh, file_rules);
  } else if (param_sharding != "first-dim") {
    throw InvalidArgument(named("param_sharding") + " " + param_sharding + " needs " +
                          named("zero") + " 1, 2 or 3 (with " + named("zero") +
                          " 0 nothing is sharded)");
  }
  return layout;
}

ParameterShardings shardings_held(const ParameterShardings& all,
                                  const std::vector<ParameterSpec>& all_specs,
                                  const std::vector<ParameterSpec>& held) {
  ParameterShardings mine = all;
  mine.specs.clear();
  mine.reasons.clear();
  for (const ParameterSpec& spec : held) {
    std::size_t p = 0;
    while (p < all_specs.size() && all_specs[p].name != spec.name) ++p;
    if (p == all_specs.size()) {
      throw InvalidArgument("parameter '" + spec.name + "' has no sharding among the model's");
    }
    mine.specs.push_back(all.specs[p]);
    mine.reasons.push_back(all.reasons[p]);
  }
  return mine;
}

std::vector<ParameterPlanRow> parameter_plan_rows(const std::vector<ParameterSpec>& specs,
                                                  const std::vector<std::int64_t>& layers,
                                                  const std::vector<PartitionSpec>& placements,
                                                  const ParameterShardings* shardings) {
  std::vector<ParameterPlanRow> rows;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const std::int64_t layer = p < layers.size() ? layers[p] : -1;
    if (layer > 0) continue;  // the first layer stands for every layer
    std::string name = specs[p].name;
    if (layer == 0) {
      // The layer's number in the name, as '*': "transformer.h.*.ln_1.weight".
      const std::size_t at = name.find(".0.");
      if (at != std::string::npos) name.replace(at, 3, ".*.");
    }
    const PartitionSpec zero = shardings != nullptr ? shardings->specs[p] : PartitionSpec();
    Shape block = specs[p].shape;
    if (shardings != nullptr) {
      block = NamedSharding(Mesh({shardings->axis}, {shardings->size}), zero, Evenness::kUneven)
                  .shard_shape(specs[p].shape);
    }
    std::string placement =
        whole_mesh_placement(placements[p], zero, specs[p].shape.size()).to_string();
    if (specs[p].gradient.model_sharers > 1) {  // rows no PartitionSpec can place
      const auto blocks = static_cast<std::size_t>(specs[p].global_shape[0] / specs[p].shape[0]);
      placement += " (" + shared_rows_words(blocks, specs[p].gradient.model_sharers) + ")";
    }
    rows.push_back({name, specs[p].whole_shape(), block, placement,
                    shardings != nullptr ? shardings->reasons[p] : std::string("ZeRO 0")});
  }
  return rows;
}

std::string sharding_plan(int zero, const ParallelContext& context, std::size_t units) {
  if (context.shard_axis().empty()) {
    return "parameters, gradients and optimizer state replicated over the data-parallel ranks "
           "(the mesh has none)";
  }
  const std::string& axis = context.shard_axis();
  const std::string along =
      " along " + axis + (context.replica_axis().empty() ? "" : ", replicated along data (HSDP)");
  const std::string blocks = "each rank's blocks of the parameters (below), " +
                             std::to_string(context.degree(axis)) + " ranks" + along;
  switch (zero) {
    case 0: return "parameters, gradients and optimizer state replicated";
    case 1: return "parameters and gradients replicated, optimizer state sharded: " + blocks;
    case 2: return "parameters replicated, gradients and optimizer state sharded: " + blocks;
    default:
      return "parameters, gradients and optimizer state sharded: " + blocks + "; each of " +
             std::to_string(units) + " units is gathered for its use and freed after";
  }
}

std::string plan_text(const JobPlan& plan) {
  std::string text = "mesh " + plan.mesh + " (" + std::to_string(plan.ranks) + " rank" +
                     (plan.ranks > 1 ? "s" : "") + ", " + plan.backend + "), " + plan.model + ", " +
                     std::to_string(plan.parameters) + " parameters\n";
  text += "plan: batch " + std::to_string(plan.batch) + " x " + std::to_string(plan.seq) +
          " tokens split among " + std::to_string(plan.data_parallel) + " data-parallel rank" +
          (plan.data_parallel > 1 ? "s" : "") + " (data x fsdp x expert)";
  if (plan.model_parallel > 1) {
    text += ", each layer split over " + std::to_string(plan.model_parallel) +
            " model ranks (tensor parallel" +
            (plan.sequence_parallel ? ", sequence parallel" : "") + ")";
  }
  text += "; " + plan.sharding + "\n";
  if (plan.precision == Precision::kBf16) {
    text +=
        "precision: bf16 mixed (float32 weights, gradients and optimizer state; the matrix "
        "products on bf16 copies)";
    if (plan.residual_dtype == DType::kBF16) text += "; residual stream in bf16";
    text += plan.reduce_dtype == DType::kBF16 ? "; gradients reduced in bf16\n" : "\n";
  } else if (plan.reduce_dtype == DType::kBF16) {
    text += "precision: fp32; gradients reduced in bf16\n";
  }
  if (plan.pipeline) {
    const PipelineLayout& p = *plan.pipeline;
    const std::size_t per_rank = plan.batch / static_cast<std::size_t>(plan.data_parallel);
    text += "pipeline: " + std::to_string(plan.stages.size()) + " stages, " +
            to_string(p.schedule) + ", " + std::to_string(p.microbatches) + " micro-batches of " +
            std::to_string(per_rank / static_cast<std::size_t>(p.microbatches)) +
            " sequences (published bubble " + std::to_string(plan.published_bubble).substr(0, 5) +
            ")\n";
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      text += "  stage " + std::to_string(s) + " (" + ranks_text(plan.stages[s].ranks) + "):";
      for (std::size_t k = 0; k < plan.stages[s].chunks.size(); ++k) {
        const LayerRange& range = plan.stages[s].chunks[k];
        text += std::string(k == 0 ? " " : "; ") + (range.has_first() ? "the embeddings, " : "") +
                layer_span(range) +
                (range.has_last(plan.layers) ? ", the final norm and the head" : "");
      }
      text += "\n";
    }
  }
  std::vector<std::vector<std::string>> table{{"parameter", "shape", "block", "placement", "why"}};
  for (const ParameterPlanRow& row : plan.rows) {
    table.push_back({"  " + row.name, shardwise::to_string(row.shape),
                     shardwise::to_string(row.block), row.placement, row.why});
  }
  text += shardwise::detail::format_table(table);
  for (const std::string& note : plan.notes) text += "note: " + note + "\n";
  return text;
}

}  // namespace shardwise::train
