// `shardwise plan`: memory, traffic and step time of one layout, or the best layouts found by
// searching every valid one, for a model on a cluster.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include "blas_flag.hpp"
#include "command.hpp"
#include "notes.hpp"
#include "number_text.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/kernels/matmul.hpp"
#include "shardwise/models/model_registry.hpp"
#include "shardwise/models/model_resolution.hpp"
#include "shardwise/plan/plan_request.hpp"
#include "shardwise/strategy/precision.hpp"
#include "text_table.hpp"

namespace shardwise::cli {
namespace {

// This machine shared by `devices` in-process ranks: each gets the fp32 matrix-product rate the
// kernels measure on its share of the cores, and an equal share of the memory.
plan::Cluster this_machine(std::int64_t devices) {
  plan::Cluster c;
  c.name = "cpu";
  c.devices = devices;
  c.devices_per_node = devices;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  c.memory_bytes = pages > 0 && page > 0 ? static_cast<std::int64_t>(pages) * page / devices : 1;
  // The best of ten windows of 1024-square products (the first ones also compile oneDNN's
  // kernels and wake the threads), on a device's share of the cores: as many threads as
  // `shardwise train` gives each rank (all cores for one rank, one each for several).
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const std::int64_t threads = devices == 1 ? cores : 1;
  const int caller_threads = kernels::blas_threads();
  kernels::set_blas_threads(static_cast<int>(threads));
  constexpr std::size_t n = 1024;
  std::vector<float> a(n * n, 0.5F);
  std::vector<float> b(n * n, 0.25F);
  std::vector<float> out(n * n);
  double best = 0;
  for (int window = 0; window < 10; ++window) {
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < 2; ++call) {
      kernels::matmul_forward(out.data(), a.data(), b.data(), nullptr, n, n, n);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2 * 2.0 * n * n * n / seconds);
  }
  kernels::set_blas_threads(caller_threads);  // the command runs inside other programs too
  // Ranks beyond the cores share them.
  c.peak_flops_fp32 =
      best * std::min(1.0, static_cast<double>(cores) / static_cast<double>(devices * threads));
  c.peak_flops_bf16 = c.peak_flops_fp32;
  c.intra_node = {5e9, 5e-6};
  c.inter_node = c.intra_node;
  return c;
}

std::string gib_text(std::int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(bytes < (std::int64_t{10} << 30) ? 2 : 1)
      << static_cast<double>(bytes) / (1 << 30) << " GiB";
  return out.str();
}

nlohmann::json memory_json(const plan::MemoryPerDevice& m) {
  return {{"params", m.params},
          {"grads", m.grads},
          {"optimizer", m.optimizer},
          {"activations", m.activations},
          {"activations_per_layer", m.activations_per_layer},
          {"buffers", m.buffers},
          {"compute_copies", m.compute_copies},
          {"total", m.total()}};
}

nlohmann::json candidate_json(const plan::Prediction& p) {
  const plan::Layout& l = p.layout;
  // activations_by_stage (kept for its readers) is memory_by_stage's activations.
  nlohmann::json by_stage = nlohmann::json::array();
  nlohmann::json activations_by_stage = nlohmann::json::array();
  for (const plan::MemoryPerDevice& m : p.memory_by_stage) {
    by_stage.push_back(memory_json(m));
    activations_by_stage.push_back(m.activations);
  }
  nlohmann::json comm = nlohmann::json::object();
  for (const auto& [axis, bytes] : p.comm_bytes_per_step) comm[axis] = bytes;
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, bytes] : p.comm_bytes_per_kind) kinds[kind] = bytes;
  return {{"layout",
           {{"data", l.data},
            {"fsdp", l.fsdp},
            {"model", l.model},
            {"pipeline", l.pipeline},
            {"expert", l.expert},
            {"zero", l.zero},
            {"microbatches", l.microbatches},
            {"schedule", plan::to_string(l.schedule)},
            {"virtual_stages", l.virtual_stages},
            {"stage_layers", l.stage_layers},
            {"recompute", plan::to_string(l.recompute)},
            {"sequence_parallel", l.sequence_parallel}}},
          {"memory_per_device", memory_json(p.memory)},
          {"memory_by_stage", by_stage},
          {"activations_by_stage", activations_by_stage},
          {"comm_bytes_per_step", comm},
          {"comm_bytes_per_kind", kinds},
          {"model_flops_per_step", p.model_flops_per_step},
          {"hardware_flops_per_step", p.hardware_flops_per_step},
          {"step_time_s", p.step_time_s},
          {"mfu", p.mfu},
          {"bubble_fraction", p.bubble_fraction},
          {"fits", p.fits}};
}

// One line of 50 characters: each part of the device's memory in its own letter.
std::string memory_bar(const plan::MemoryPerDevice& m, std::int64_t capacity) {
  const std::int64_t scale = std::max(capacity, m.total());
  std::string bar;
  for (const auto& [bytes, letter] : {std::pair{m.params, 'P'},
                                      {m.grads, 'G'},
                                      {m.optimizer, 'O'},
                                      {m.activations, 'A'},
                                      {m.buffers, 'B'},
                                      {m.compute_copies, 'C'}}) {
    bar += std::string(static_cast<std::size_t>(
                           50.0 * static_cast<double>(bytes) / static_cast<double>(scale) + 0.5),
                       letter);
  }
  if (bar.size() < 50) bar += std::string(50 - bar.size(), '.');
  return "[" + bar + "]";
}

class PlanCommand final : public Command {
 public:
  explicit PlanCommand(CLI::App& parent)
      : app_(parent.add_subcommand("plan",
                                   "Predict memory, traffic and step time of parallel layouts "
                                   "from published formulas, and search for the best")) {
    app_->add_option("--model", model_,
                     "A preset (" + models::preset_names() +
                         "), the trainer's model file, a Hugging Face folder or its config.json, a "
                         "manifest or a .safetensors file")
        ->required();
    app_->add_option("--devices", devices_, "Devices in the cluster")->required();
    app_->add_option("--devices-per-node", per_node_, "Devices per node")->default_val("8");
    app_->add_option("--device", device_, "h100-80gb, a100-80gb, h200, cpu or a JSON file")
        ->default_val("h100-80gb");
    app_->add_option("--global-batch", batch_, "Sequences per step")->required();
    app_->add_option("--seq", seq_, "Tokens per sequence")->required();
    app_->add_option("--micro-batch", micro_, "Sequences per micro-batch")->default_val("1");
    app_->add_option("--precision", precision_,
                     "fp32 or bf16 (as `shardwise train` keeps them), or bf16-mixed (bf16 "
                     "parameters, gradients and activations, as Megatron-LM keeps them)")
        ->default_val("bf16-mixed");
    app_->add_option("--reduce-dtype", reduce_dtype_,
                     "What gradients are reduced in: fp32 or bf16 (as train's; default: the "
                     "precision's own, bf16 for bf16-mixed, fp32 otherwise)");
    app_->add_option("--residual-dtype", residual_dtype_,
                     "What the residual stream is kept in under --precision bf16: fp32 (the "
                     "default) or bf16 (as train's)");
    app_->add_option("--expert-bias-rate", expert_bias_rate_,
                     "A Mixture of Experts' expert bias rate, as train's (above 0: each step's "
                     "choice counts are summed over the ranks)")
        ->default_val("0");
    app_->add_option("--optimizer", optimizer_, "adam or sgd")->default_val("adam");
    app_->add_option("--recompute", recompute_, "none, selective or full")->default_val("none");
    app_->add_flag("--sequence-parallel", sequence_parallel_,
                   "Split LayerNorm and dropout activations over the model axis");
    app_->add_option("--heads", heads_, "Attention heads, where the model file does not say");
    app_->add_option("--efficiency", efficiency_,
                     "Share of peak FLOP/s the products reach (default 0.5; 0.75 on cpu)");
    app_->add_option("--overlap", overlap_,
                     "Share of data-parallel and FSDP communication hidden by compute")
        ->default_val("0.5");
    app_->add_option("--layout", layout_,
                     "Evaluate this layout: data=..,fsdp=..,model=..,pipeline=..");
    app_->add_option("--zero", zero_, "ZeRO stage of --layout")->default_val("0");
    app_->add_option("--microbatches", microbatches_,
                     "Micro-batches per step of --layout (default: the batch's)");
    app_->add_option("--schedule", schedule_, "gpipe, 1f1b or interleaved")->default_val("1f1b");
    app_->add_option("--virtual-stages", virtual_, "Model chunks per pipeline rank")
        ->default_val("1");
    app_->add_option("--stage-layers", stage_layers_,
                     "Layers of each virtual pipeline stage of --layout, e.g. 3,2 (default: an "
                     "even split, the earlier stages taking one more where it is uneven, as "
                     "`shardwise train` splits them)");
    app_->add_option("--top", top_, "Layouts to show")->default_val("5");
    add_blas_option(*app_, blas_);
    app_->add_flag("--json", json_, "Print one JSON object");
  }

  [[nodiscard]] const CLI::App& app() const override { return *app_; }

  void run(std::ostream& out) const override {
    const std::int64_t devices = bounded(devices_, "--devices", 1, std::int64_t{1} << 20);
    const std::int64_t per_node =
        std::min(bounded(per_node_, "--devices-per-node", 1, std::int64_t{1} << 24), devices);
    plan::TrainingSetup setup;
    setup.global_batch = bounded(batch_, "--global-batch", 1, plan::TrainingSetup::kMaxGlobalBatch);
    setup.seq = bounded(seq_, "--seq", 1, plan::TrainingSetup::kMaxSeq);
    setup.micro_batch = bounded(micro_, "--micro-batch", 1, setup.global_batch);
    setup.precision = plan::parse_precision(precision_, "--precision");
    if (reduce_dtype_) setup.reduce_dtype = parse_float_dtype(*reduce_dtype_, "--reduce-dtype");
    if (residual_dtype_) {
      setup.residual_dtype = parse_float_dtype(*residual_dtype_, "--residual-dtype");
      if (setup.precision != plan::Precision::kBf16) {
        throw InvalidArgument(
            "--residual-dtype is for --precision bf16 (the trainer's float32 "
            "masters with bf16 products); --precision is " +
            precision_);
      }
    }
    setup.optimizer = plan::parse_optimizer(optimizer_, "--optimizer");
    setup.compute_efficiency =
        efficiency_ ? share(*efficiency_, "--efficiency", plan::TrainingSetup::kLeastEfficiency)
                    : (device_ == "cpu" ? 0.75 : 0.5);
    setup.overlap = share(overlap_, "--overlap", 0);
    const plan::Recompute recompute = parse_recompute(recompute_, "--recompute");
    std::optional<std::int64_t> heads;
    if (heads_) heads = bounded(*heads_, "--heads", 1, std::int64_t{1} << 20);
    const models::ResolvedModel argument = models::resolve_model(model_, "--model");
    show_notes("plan", argument.notes);
    const ModelManifest& manifest = argument.manifest;
    const plan::ModelShape shape = plan::shape_of(manifest, heads);
    const double expert_bias_rate = finite_number(expert_bias_rate_, "--expert-bias-rate");
    if (!(expert_bias_rate >= 0 && expert_bias_rate <= 1e6)) {
      throw InvalidArgument("--expert-bias-rate is " + expert_bias_rate_ +
                            "; expected 0 (no expert bias) or a rate up to 1e6");
    }
    setup.expert_bias = expert_bias_rate > 0;
    if (setup.expert_bias && !(shape.transformer && shape.transformer->moe())) {
      throw InvalidArgument("--expert-bias-rate " + expert_bias_rate_ +
                            " moves a Mixture of Experts' expert bias; --model has no experts");
    }
    plan::Cluster cluster;
    if (device_ != "cpu" && app_->get_option("--blas")->count() > 0) {
      throw InvalidArgument(
          "--blas chooses the library whose products --device cpu measures; "
          "--device " +
          device_ + " is not measured");
    }
    if (device_ == "cpu") {
      const ScopedBlas blas(blas_);
      cluster = this_machine(devices);
    } else if (device_.find('.') != std::string::npos || device_.find('/') != std::string::npos) {
      if (app_->get_option("--devices-per-node")->count() > 0) {
        throw InvalidArgument("--devices-per-node: the cluster file '" + device_ +
                              "' gives devices_per_node itself");
      }
      try {
        cluster = plan::Cluster::from_json(read_file(device_, "--device"), devices);
      } catch (const InvalidArgument&) {
        throw;
      } catch (const Error& e) {
        throw InvalidArgument("--device '" + device_ + "': " + e.what());
      }
    } else {
      cluster = plan::Cluster::preset(device_, devices, per_node);
    }
    const auto top = static_cast<std::size_t>(bounded(top_, "--top", 1, 1000));
    if (layout_ && app_->get_option("--top")->count() > 0) {
      throw InvalidArgument(
          "--top ranks the layouts a search finds; with --layout one layout is "
          "evaluated");
    }
    plan::check_setup(shape, setup, "--seq");
    if (!layout_) {  // what only a given layout takes would be lost on a search
      for (const char* flag :
           {"--zero", "--microbatches", "--schedule", "--virtual-stages", "--stage-layers"}) {
        if (app_->get_option(flag)->count() > 0) {
          throw InvalidArgument(std::string(flag) +
                                " describes the layout given with --layout; a search (without "
                                "--layout) tries every value");
        }
      }
    }
    std::vector<plan::RankedLayout> ranked;
    std::size_t evaluated = 1;
    if (layout_) {
      ranked.push_back(
          {plan::evaluate(shape, cluster, setup, layout_from(setup, recompute, shape)), ""});
    } else {
      plan::SearchOptions options;
      options.top = top;
      options.recompute = recompute;
      options.sequence_parallel = sequence_parallel_;
      const plan::SearchResult result =
          plan::search_ranked(shape, cluster, setup, options, "--global-batch");
      ranked = result.ranked;
      evaluated = result.evaluated;
    }
    if (json_) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const plan::RankedLayout& r : ranked) candidates.push_back(candidate_json(r.prediction));
      out << nlohmann::json{{"model", {{"parameters", shape.parameters}, {"layers", shape.layers}}},
                            {"candidates", candidates},
                            {"best", 0}}
                 .dump()
          << '\n';
      return;
    }
    out << "model    " << shape.to_string() << "\n"
        << "cluster  " << devices << " x " << cluster.name << " (" << cluster.devices_per_node
        << " per node, " << gib_text(cluster.memory_bytes) << " and " << std::setprecision(3)
        << (plan::element_types(setup.precision).compute == DType::kF32 ? cluster.peak_flops_fp32
                                                                        : cluster.peak_flops_bf16) /
               1e12
        << " TFLOP/s each)\n"
        << "setup    batch " << setup.global_batch << " x " << setup.seq << " tokens, "
        << plan::to_string(setup.precision) << ", " << plan::to_string(setup.optimizer)
        << ", efficiency " << setup.compute_efficiency << ", overlap " << setup.overlap << "\n"
        << (layout_ ? std::string() : std::to_string(evaluated) + " valid layouts evaluated\n")
        << "\n";
    std::vector<std::vector<std::string>> rows{
        {"#", "layout", "memory/device", "fits", "step", "MFU", "bubble", "why not first"}};
    for (std::size_t i = 0; i < ranked.size(); ++i) {
      const plan::Prediction& p = ranked[i].prediction;
      std::ostringstream step;
      step << std::setprecision(3) << p.step_time_s << " s";
      std::ostringstream mfu;
      mfu << std::fixed << std::setprecision(1) << 100 * p.mfu << "%";
      std::ostringstream bubble;
      bubble << std::fixed << std::setprecision(1) << 100 * p.bubble_fraction << "%";
      rows.push_back({std::to_string(i + 1), p.layout.to_string(), gib_text(p.memory.total()),
                      p.fits ? "yes" : "no", step.str(), mfu.str(), bubble.str(),
                      ranked[i].why_not_best});
    }
    out << format_table(rows);
    const plan::MemoryPerDevice& m = ranked.front().prediction.memory;
    out << "\nmemory of the first's most loaded device, of " << gib_text(cluster.memory_bytes)
        << ":\n"
        << memory_bar(m, cluster.memory_bytes) << "\n"
        << "P params " << gib_text(m.params) << ", G grads " << gib_text(m.grads)
        << ", O optimizer " << gib_text(m.optimizer) << ", A activations "
        << gib_text(m.activations) << ", B buffers " << gib_text(m.buffers);
    if (m.compute_copies > 0) out << ", C compute copies " << gib_text(m.compute_copies);
    out << "\n";
  }

 private:
  // A number from `least` to 1.
  static double share(const std::string& text, std::string_view flag, double least) {
    const double value = finite_number(text, flag);
    if (!(value >= least && value <= 1)) {
      std::ostringstream bounds;
      bounds << least << " to 1";
      throw InvalidArgument(std::string(flag) + " is " + text + "; expected " + bounds.str());
    }
    return value;
  }

  plan::Layout layout_from(const plan::TrainingSetup& setup, plan::Recompute recompute,
                           const plan::ModelShape& shape) const {
    const Mesh mesh = [&] {
      try {
        return Mesh::parse(*layout_);
      } catch (const Error& e) {
        throw InvalidArgument("--layout: " + std::string(e.what()));
      }
    }();
    plan::Layout l = plan::layout_of_axes(mesh, "--layout");
    l.zero = static_cast<int>(integer(zero_, "--zero"));
    if (l.zero < 0 || l.zero > 3) throw InvalidArgument("--zero is " + zero_ + "; expected 0 to 3");
    // 0: the batch's, as plan::complete_layout fills it in.
    l.microbatches =
        microbatches_ ? bounded(*microbatches_, "--microbatches", 1, setup.global_batch) : 0;
    l.schedule = plan::parse_schedule(schedule_, "--schedule");
    l.virtual_stages = bounded(virtual_, "--virtual-stages", 1, 1 << 20);
    l.recompute = recompute;
    l.sequence_parallel = sequence_parallel_;
    const std::int64_t chunks = l.pipeline * l.virtual_stages;
    if (stage_layers_) {
      std::istringstream words(*stage_layers_);
      for (std::string word; std::getline(words, word, ',');) {
        l.stage_layers.push_back(bounded(word, "--stage-layers", 1, shape.layers));
      }
      if (static_cast<std::int64_t>(l.stage_layers.size()) != chunks) {
        throw InvalidArgument(
            "--stage-layers lists " + std::to_string(l.stage_layers.size()) +
            " stages; --layout has pipeline x virtual stages = " + std::to_string(chunks));
      }
    }
    return plan::complete_layout(std::move(l), shape, setup);
  }

  CLI::App* app_;
  std::string model_;
  std::string devices_;
  std::string per_node_;
  std::string device_;
  std::string batch_;
  std::string seq_;
  std::string micro_;
  std::string precision_;
  std::optional<std::string> reduce_dtype_;
  std::optional<std::string> residual_dtype_;
  std::string expert_bias_rate_ = "0";
  std::string optimizer_;
  std::string recompute_;
  std::string blas_ = "onednn";
  bool sequence_parallel_ = false;
  std::optional<std::string> heads_;
  std::optional<std::string> efficiency_;
  std::string overlap_;
  std::optional<std::string> layout_;
  std::string zero_;
  std::optional<std::string> microbatches_;
  std::string schedule_;
  std::string virtual_;
  std::optional<std::string> stage_layers_;
  std::string top_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> add_plan_command(CLI::App& parent) {
  return std::make_unique<PlanCommand>(parent);
}

}  // namespace shardwise::cli
