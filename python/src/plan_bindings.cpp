// The planner's types: model manifests and shapes, clusters, training setups, layouts,
// predictions and search results. shardwise.plan and shardwise.search (python/shardwise/
// planner.py) turn a user's model (a Hugging Face config, a manifest, a parameter tree) into a
// manifest and call plan_layout and search_layouts here, which take the same library path as
// `shardwise plan` (plan/plan_request.hpp).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <charconv>

#include "bindings.hpp"
#include "conversions.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mesh.hpp"
#include "shardwise/core/safetensors.hpp"
#include "shardwise/plan/cost_model.hpp"
#include "shardwise/plan/plan_request.hpp"
#include "shardwise/strategy/mesh_axes.hpp"
#include "shardwise/strategy/model_manifest.hpp"
#include "shardwise/strategy/precision.hpp"
#include "shardwise/strategy/recompute.hpp"

namespace shardwise::python {
namespace {

// The shortest text that reads back as `value` ("0.5", "0.75").
std::string shortest_text(double value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

void bind_models(nb::module_& m) {
  nb::class_<ParameterInfo>(m, "ParameterInfo")
      .def_ro("name", &ParameterInfo::name)
      .def_prop_ro("shape", [](const ParameterInfo& p) { return nb::tuple(nb::cast(p.shape)); })
      .def_prop_ro("dtype", [](const ParameterInfo& p) { return to_string(p.dtype); })
      .def_ro("logical_axes", &ParameterInfo::logical_axes);
  nb::class_<ModelManifest>(m, "ModelManifest",
                            "A model's parameters: names, shapes, dtypes, logical axes.")
      .def_static(
          "from_json",
          [](nb::str text) { return ModelManifest::from_json(text_from(text, "text")); },
          nb::arg("text"))
      .def("to_json", &ModelManifest::to_json)
      .def_ro("parameters", &ModelManifest::parameters)
      .def_ro("axis_units", &ModelManifest::axis_units)
      .def_prop_ro("num_parameters", &ModelManifest::num_parameters)
      .def_prop_ro("num_bytes", &ModelManifest::num_bytes)
      .def("__repr__", [](const ModelManifest& manifest) {
        return "ModelManifest(" + std::to_string(manifest.parameters.size()) + " tensors, " +
               std::to_string(manifest.num_parameters()) + " parameters)";
      });
  m.def(
      "load_model_description",
      [](nb::str text) { return load_model_description(text_from(text, "text")); }, nb::arg("text"),
      "A manifest's JSON, or a Hugging Face config.json's (GPT-2, Llama, Mistral, Qwen2).");
  m.attr("MAX_SAFETENSORS_HEADER_BYTES") = kMaxSafetensorsHeaderBytes;
  m.def(
      "manifest_from_safetensors_header",
      [](nb::str header, nb::handle data_bytes) {
        return plan::manifest_from_safetensors_header(
            text_from(header, "header"),
            static_cast<std::uint64_t>(bounded_int(data_bytes, "data_bytes", 0, INT64_MAX)));
      },
      nb::arg("header"), nb::arg("data_bytes"));

  nb::class_<plan::ModelShape>(m, "ModelShape", "What the planner's formulas know of a model.")
      .def_ro("layers", &plan::ModelShape::layers)
      .def_ro("hidden", &plan::ModelShape::hidden)
      .def_ro("heads", &plan::ModelShape::heads)
      .def_ro("kv_heads", &plan::ModelShape::kv_heads)
      .def_ro("head_dim", &plan::ModelShape::head_dim)
      .def_ro("ffn", &plan::ModelShape::ffn)
      .def_ro("vocab", &plan::ModelShape::vocab)
      .def_ro("gated_mlp", &plan::ModelShape::gated_mlp)
      .def_ro("parameters", &plan::ModelShape::parameters)
      .def_ro("tied_embeddings", &plan::ModelShape::tied_embeddings)
      .def_ro("context", &plan::ModelShape::context)
      .def("__repr__",
           [](const plan::ModelShape& s) { return "ModelShape(" + s.to_string() + ")"; });
  m.def(
      "shape_of",
      [](const ModelManifest& manifest, nb::handle heads) {
        return plan::shape_of(manifest, optional_int(heads, "heads", 1, std::int64_t{1} << 20),
                              "heads");
      },
      nb::arg("manifest"), nb::arg("heads") = nb::none());
}

void bind_cluster(nb::module_& m) {
  nb::class_<plan::Link>(m, "Link")
      .def_ro("bandwidth", &plan::Link::bandwidth,
              "Bytes/s per device (nccl-tests' bus bandwidth).")
      .def_ro("latency", &plan::Link::latency, "Seconds per step of a collective.");
  nb::class_<plan::Cluster>(m, "Cluster", "The devices a plan runs on.")
      .def_static(
          "preset",
          [](nb::str name, nb::handle devices, nb::handle per_node) {
            const std::int64_t count = int_from(devices, "devices");
            return plan::Cluster::preset(text_from(name, "name"), count,
                                         std::min(int_from(per_node, "devices_per_node"), count));
          },
          nb::arg("name"), nb::arg("devices"), nb::arg("devices_per_node") = 8)
      .def_static(
          "from_json",
          [](nb::str text, nb::handle devices) {
            return plan::Cluster::from_json(text_from(text, "text"), int_from(devices, "devices"));
          },
          nb::arg("text"), nb::arg("devices"))
      .def_static("preset_names", &plan::Cluster::preset_names)
      .def_ro("name", &plan::Cluster::name)
      .def_ro("devices", &plan::Cluster::devices)
      .def_ro("devices_per_node", &plan::Cluster::devices_per_node)
      .def_ro("memory_bytes", &plan::Cluster::memory_bytes)
      .def_ro("peak_flops_fp32", &plan::Cluster::peak_flops_fp32)
      .def_ro("peak_flops_bf16", &plan::Cluster::peak_flops_bf16)
      .def_ro("intra_node", &plan::Cluster::intra_node)
      .def_ro("inter_node", &plan::Cluster::inter_node)
      .def("__repr__", [](const plan::Cluster& c) {
        return "Cluster('" + c.name + "', devices=" + std::to_string(c.devices) +
               ", devices_per_node=" + std::to_string(c.devices_per_node) + ")";
      });
}

void bind_setup(nb::module_& m) {
  nb::class_<plan::TrainingSetup>(m, "TrainingSetup", "A step: batch, sequence, precision.")
      .def(
          "__init__",
          [](plan::TrainingSetup* self, nb::handle global_batch, nb::handle seq,
             nb::handle micro_batch, nb::str precision, nb::str optimizer,
             nb::handle compute_efficiency, nb::handle overlap,
             std::optional<nb::str> reduce_dtype) {
            plan::TrainingSetup setup;
            setup.global_batch = int_from(global_batch, "global_batch");
            setup.seq = int_from(seq, "seq");
            setup.micro_batch = int_from(micro_batch, "micro_batch");
            setup.precision = plan::parse_precision(text_from(precision, "precision"), "precision");
            setup.optimizer = plan::parse_optimizer(text_from(optimizer, "optimizer"), "optimizer");
            setup.compute_efficiency = number_from(compute_efficiency, "compute_efficiency");
            setup.overlap = number_from(overlap, "overlap");
            if (reduce_dtype) {
              setup.reduce_dtype =
                  parse_float_dtype(text_from(*reduce_dtype, "reduce_dtype"), "reduce_dtype");
            }
            setup.validate();
            new (self) plan::TrainingSetup(setup);
          },
          nb::arg("global_batch"), nb::arg("seq"), nb::arg("micro_batch") = 1,
          nb::arg("precision") = "bf16-mixed", nb::arg("optimizer") = "adam",
          nb::arg("compute_efficiency") = 0.5, nb::arg("overlap") = 0.5,
          nb::arg("reduce_dtype") = nb::none())
      .def_ro("global_batch", &plan::TrainingSetup::global_batch)
      .def_ro("seq", &plan::TrainingSetup::seq)
      .def_ro("micro_batch", &plan::TrainingSetup::micro_batch)
      .def_prop_ro("precision",
                   [](const plan::TrainingSetup& s) { return plan::to_string(s.precision); })
      .def_prop_ro("optimizer",
                   [](const plan::TrainingSetup& s) { return plan::to_string(s.optimizer); })
      .def_ro("compute_efficiency", &plan::TrainingSetup::compute_efficiency)
      .def_ro("overlap", &plan::TrainingSetup::overlap)
      .def_prop_ro("reduce_dtype",
                   [](const plan::TrainingSetup& s) -> std::optional<std::string> {
                     if (!s.reduce_dtype) return std::nullopt;
                     return float_dtype_name(*s.reduce_dtype);
                   })
      .def("__repr__",
           [](const plan::TrainingSetup& s) {
             return "TrainingSetup(global_batch=" + std::to_string(s.global_batch) +
                    ", seq=" + std::to_string(s.seq) +
                    ", micro_batch=" + std::to_string(s.micro_batch) + ", precision='" +
                    plan::to_string(s.precision) + "', optimizer='" + plan::to_string(s.optimizer) +
                    "', compute_efficiency=" + shortest_text(s.compute_efficiency) +
                    ", overlap=" + shortest_text(s.overlap) + ", reduce_dtype=" +
                    (s.reduce_dtype ? "'" + float_dtype_name(*s.reduce_dtype) + "'" : "None") + ")";
           })
      .def("__eq__",
           [](const plan::TrainingSetup& a, nb::handle other) {
             if (!nb::isinstance<plan::TrainingSetup>(other)) return false;
             const auto& b = nb::cast<const plan::TrainingSetup&>(other);
             return a.global_batch == b.global_batch && a.seq == b.seq &&
                    a.micro_batch == b.micro_batch && a.precision == b.precision &&
                    a.optimizer == b.optimizer && a.compute_efficiency == b.compute_efficiency &&
                    a.overlap == b.overlap && a.reduce_dtype == b.reduce_dtype;
           })
      .def("__hash__", [](const plan::TrainingSetup& s) {
        return std::hash<std::string>{}(
            std::to_string(s.global_batch) + "," + std::to_string(s.seq) + "," +
            std::to_string(s.micro_batch) + "," + shortest_text(s.compute_efficiency) + "," +
            shortest_text(s.overlap));
      });

  nb::class_<plan::Layout>(m, "Layout", "Degrees, ZeRO stage, micro-batches and schedule.")
      .def(
          "__init__",
          [](plan::Layout* self, nb::handle data, nb::handle fsdp, nb::handle model,
             nb::handle pipeline, nb::handle zero, nb::handle microbatches, nb::str schedule,
             nb::handle virtual_stages, nb::handle stage_layers, nb::str recompute,
             bool sequence_parallel, nb::handle expert) {
            plan::Layout l;
            l.data = int_from(data, "data");
            l.fsdp = int_from(fsdp, "fsdp");
            l.model = int_from(model, "model");
            l.pipeline = int_from(pipeline, "pipeline");
            l.expert = int_from(expert, "expert");
            const std::int64_t stage = int_from(zero, "zero");
            if (stage < 0 || stage > 3) {
              throw InvalidArgument("zero is " + std::to_string(stage) + "; expected 0 to 3");
            }
            l.zero = static_cast<int>(stage);
            // 0: the batch's (plan::complete_layout fills it in).
            l.microbatches =
                optional_int(microbatches, "microbatches", 1, plan::TrainingSetup::kMaxGlobalBatch)
                    .value_or(0);
            l.schedule = plan::parse_schedule(text_from(schedule, "schedule"), "schedule");
            l.virtual_stages = int_from(virtual_stages, "virtual_stages");
            if (!stage_layers.is_none()) {
              l.stage_layers = ints_from(stage_layers, "stage_layers");
              if (l.stage_layers.size() > static_cast<std::size_t>(Mesh::kMaxDevices)) {
                throw InvalidArgument("stage_layers has " + std::to_string(l.stage_layers.size()) +
                                      " stages; expected at most " +
                                      std::to_string(Mesh::kMaxDevices));
              }
            }
            l.recompute = parse_recompute(text_from(recompute, "recompute"), "recompute");
            l.sequence_parallel = sequence_parallel;
            for (const auto& [field, value] : {std::pair{"data", l.data},
                                               {"fsdp", l.fsdp},
                                               {"model", l.model},
                                               {"pipeline", l.pipeline},
                                               {"expert", l.expert},
                                               {"virtual_stages", l.virtual_stages}}) {
              if (value < 1 || value > Mesh::kMaxDevices) {
                throw InvalidArgument(std::string(field) + " is " + std::to_string(value) +
                                      "; expected 1 to " + std::to_string(Mesh::kMaxDevices));
              }
            }
            new (self) plan::Layout(l);
          },
          nb::kw_only(), nb::arg("data") = 1, nb::arg("fsdp") = 1, nb::arg("model") = 1,
          nb::arg("pipeline") = 1, nb::arg("zero") = 0, nb::arg("microbatches") = nb::none(),
          nb::arg("schedule") = "1f1b", nb::arg("virtual_stages") = 1,
          nb::arg("stage_layers") = nb::none(), nb::arg("recompute") = "none",
          nb::arg("sequence_parallel") = false, nb::arg("expert") = 1)
      .def_ro("data", &plan::Layout::data)
      .def_ro("fsdp", &plan::Layout::fsdp)
      .def_ro("model", &plan::Layout::model)
      .def_ro("pipeline", &plan::Layout::pipeline)
      .def_ro("expert", &plan::Layout::expert)
      .def_ro("zero", &plan::Layout::zero)
      .def_ro("microbatches", &plan::Layout::microbatches)
      .def_prop_ro("schedule", [](const plan::Layout& l) { return plan::to_string(l.schedule); })
      .def_ro("virtual_stages", &plan::Layout::virtual_stages)
      .def_ro("stage_layers", &plan::Layout::stage_layers)
      .def_prop_ro("recompute", [](const plan::Layout& l) { return plan::to_string(l.recompute); })
      .def_ro("sequence_parallel", &plan::Layout::sequence_parallel)
      .def_prop_ro("devices", &plan::Layout::devices)
      .def("__repr__", [](const plan::Layout& l) { return "Layout(" + l.to_string() + ")"; })
      .def("__eq__",
           [](const plan::Layout& a, nb::handle other) {
             return nb::isinstance<plan::Layout>(other) &&
                    a == nb::cast<const plan::Layout&>(other);
           })
      .def("__hash__",
           [](const plan::Layout& l) { return std::hash<std::string>{}(l.to_string()); });
}

void bind_prediction(nb::module_& m) {
  nb::class_<plan::MemoryPerDevice>(m, "MemoryPerDevice", "Bytes of one device, by part.")
      .def_ro("params", &plan::MemoryPerDevice::params)
      .def_ro("grads", &plan::MemoryPerDevice::grads)
      .def_ro("optimizer", &plan::MemoryPerDevice::optimizer)
      .def_ro("activations", &plan::MemoryPerDevice::activations)
      .def_ro("activations_per_layer", &plan::MemoryPerDevice::activations_per_layer)
      .def_ro("buffers", &plan::MemoryPerDevice::buffers)
      .def_ro("compute_copies", &plan::MemoryPerDevice::compute_copies)
      .def_prop_ro("total", &plan::MemoryPerDevice::total)
      .def("__repr__", [](const plan::MemoryPerDevice& m) {
        return "MemoryPerDevice(params=" + std::to_string(m.params) +
               ", grads=" + std::to_string(m.grads) + ", optimizer=" + std::to_string(m.optimizer) +
               ", activations=" + std::to_string(m.activations) +
               ", buffers=" + std::to_string(m.buffers) +
               ", compute_copies=" + std::to_string(m.compute_copies) +
               ", total=" + std::to_string(m.total()) + ")";
      });
  nb::class_<plan::Prediction>(m, "Prediction", "What one layout costs.")
      .def_ro("layout", &plan::Prediction::layout)
      .def_ro("memory", &plan::Prediction::memory)
      .def_ro("memory_by_stage", &plan::Prediction::memory_by_stage)
      .def_ro("comm_bytes_per_step", &plan::Prediction::comm_bytes_per_step,
              "{mesh axis: bytes a device sends per step}.")
      .def_ro("comm_bytes_per_kind", &plan::Prediction::comm_bytes_per_kind)
      .def_ro("model_flops_per_step", &plan::Prediction::model_flops_per_step)
      .def_ro("hardware_flops_per_step", &plan::Prediction::hardware_flops_per_step)
      .def_ro("compute_time_s", &plan::Prediction::compute_time_s)
      .def_ro("bubble_time_s", &plan::Prediction::bubble_time_s)
      .def_ro("comm_time_s", &plan::Prediction::comm_time_s)
      .def_ro("step_time_s", &plan::Prediction::step_time_s)
      .def_ro("mfu", &plan::Prediction::mfu)
      .def_ro("bubble_fraction", &plan::Prediction::bubble_fraction)
      .def_ro("fits", &plan::Prediction::fits)
      .def("__repr__", [](const plan::Prediction& p) {
        return "Prediction(" + p.layout.to_string() + ": " + std::to_string(p.step_time_s) +
               " s a step, " + std::to_string(p.memory.total()) + " bytes a device, " +
               (p.fits ? "fits" : "does not fit") + ")";
      });
  nb::class_<plan::RankedLayout>(m, "RankedLayout")
      .def_ro("prediction", &plan::RankedLayout::prediction)
      .def_ro("why_not_best", &plan::RankedLayout::why_not_best)
      .def("__repr__", [](const plan::RankedLayout& r) {
        return "RankedLayout(" + r.prediction.layout.to_string() +
               (r.why_not_best.empty() ? std::string(", the best") : ": " + r.why_not_best) + ")";
      });
  nb::class_<plan::SearchResult>(m, "SearchResult")
      .def_ro("ranked", &plan::SearchResult::ranked, "Best first.")
      .def_ro("evaluated", &plan::SearchResult::evaluated)
      .def_ro("fitting", &plan::SearchResult::fitting)
      .def_ro("skipped", &plan::SearchResult::skipped)
      .def("__repr__", [](const plan::SearchResult& r) {
        return "SearchResult(" + std::to_string(r.ranked.size()) + " ranked of " +
               std::to_string(r.evaluated) + " evaluated, " + std::to_string(r.fitting) +
               " fitting)";
      });
}

}  // namespace

void bind_plan(nb::module_& m) {
  m.def(
      "check_layout_axes",
      [](nb::handle axes, nb::handle field) {
        const std::string named = text_from(field, "field");
        const std::vector<std::string> names = names_from(axes, named + " axes");
        check_trained_axes(Mesh(names, std::vector<std::int64_t>(names.size(), 1)), named);
      },
      nb::arg("axes"), nb::arg("field"),
      "Refuses (InvalidArgument starting with `field`) an axis no role of the mesh-axis registry "
      "has, or one the training layer does not run yet, naming what it is.");
  bind_models(m);
  bind_cluster(m);
  bind_setup(m);
  bind_prediction(m);
  m.def(
      "plan_layout",
      [](const plan::ModelShape& model, const plan::Cluster& cluster,
         const plan::TrainingSetup& setup, const plan::Layout& layout) {
        plan::check_setup(model, setup, "seq");
        return plan::evaluate(model, cluster, setup, plan::complete_layout(layout, model, setup));
      },
      nb::arg("model"), nb::arg("cluster"), nb::arg("setup"), nb::arg("layout"),
      "One layout's prediction, its micro-batches and stages completed as the trainer runs "
      "them.");
  m.def(
      "search_layouts",
      [](const plan::ModelShape& model, const plan::Cluster& cluster,
         const plan::TrainingSetup& setup, nb::handle top, nb::str recompute,
         bool sequence_parallel, bool model_within_node) {
        plan::check_setup(model, setup, "seq");
        plan::SearchOptions options;
        const std::int64_t count = int_from(top, "top");
        if (count < 1 || count > 1000) {
          throw InvalidArgument("top is " + std::to_string(count) + "; expected 1 to 1000");
        }
        options.top = static_cast<std::size_t>(count);
        options.recompute = parse_recompute(text_from(recompute, "recompute"), "recompute");
        options.sequence_parallel = sequence_parallel;
        options.model_within_node = model_within_node;
        return plan::search_ranked(model, cluster, setup, options, "global_batch");
      },
      nb::arg("model"), nb::arg("cluster"), nb::arg("setup"), nb::arg("top") = 5,
      nb::arg("recompute") = "none", nb::arg("sequence_parallel") = false,
      nb::arg("model_within_node") = true);
}

}  // namespace shardwise::python
