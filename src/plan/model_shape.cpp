#include "shardwise/plan/model_shape.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "shardwise/core/checked_math.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/strategy/parameter_rules.hpp"

namespace shardwise::plan {
namespace {

bool contains_any(const std::string& name, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](const char* part) { return name.find(part) != std::string::npos; });
}

bool is_token_embedding(const std::string& name) {
  return contains_any(name, {"wte", "embed_tokens", "word_embeddings", "tok_embeddings"});
}

bool is_position_embedding(const std::string& name) {
  return contains_any(name, {"wpe", "position"});
}

bool is_output_head(const std::string& name) {
  return contains_any(name, {"lm_head", "output.weight", "logits"});
}

bool is_mlp(const std::string& name) {
  return contains_any(name, {"mlp", "feed_forward", "ffn", ".fc", "up_proj", "gate_proj",
                             "down_proj", ".w1", ".w2", ".w3"});
}

}  // namespace

std::int64_t ModelShape::Unit::elements() const { return elements(1); }

std::int64_t ModelShape::Unit::elements(std::int64_t degree, std::int64_t expert_degree) const {
  std::int64_t total = 0;
  if (model_split.empty()) {
    for (const Shape& shape : shapes) total = checked_add(total, num_elements(shape), "parameters");
    return (total + degree - 1) / degree;
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    total = checked_add(total, num_elements(block(i, degree, expert_degree)), "parameters");
  }
  return total;
}

std::int64_t ModelShape::Unit::expert_elements(std::int64_t degree,
                                               std::int64_t expert_degree) const {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (is_experts(i)) {
      total = checked_add(total, num_elements(block(i, degree, expert_degree)), "parameters");
    }
  }
  return total;
}

Shape ModelShape::Unit::block(std::size_t i, std::int64_t degree,
                              std::int64_t expert_degree) const {
  Shape shape = shapes.at(i);
  if (is_experts(i) && !shape.empty()) shape[0] /= expert_degree;
  if (model_split.empty()) {
    return degree > 1 ? Shape{(num_elements(shape) + degree - 1) / degree} : shape;
  }
  if (i >= model_split.size() || model_split[i] < 0) return shape;
  const std::int64_t whole_heads = i < split_heads.size() ? split_heads[i] : 0;
  // Heads the degree does not divide but divides: one head on each degree / heads ranks
  // (vLLM's rule, the trainer's train::SharedRows); heads neither: held whole.
  const std::int64_t blocks = whole_heads == 0 || whole_heads % degree == 0 ? degree
                              : degree % whole_heads == 0                   ? whole_heads
                                                                            : 1;
  shape[static_cast<std::size_t>(model_split[i])] /= blocks;
  return shape;
}

std::string ModelShape::to_string() const {
  std::ostringstream out;
  out << layers << " layers, hidden " << hidden << ", " << heads << " heads";
  if (kv_heads != heads) out << " (" << kv_heads << " key/value)";
  out << ", ffn " << ffn << (gated_mlp ? " (gated)" : "") << ", vocab " << vocab << ", "
      << parameters << " parameters";
  return out.str();
}

ModelShape shape_of(const ModelManifest& manifest, std::optional<std::int64_t> heads,
                    const std::string& heads_field) {
  const ParameterNameRules names = ParameterNameRules::defaults();
  ModelShape shape;
  std::map<std::int64_t, std::int64_t> per_layer;
  std::map<std::int64_t, std::int64_t> mlp_matrices;
  std::map<std::int64_t, std::int64_t> per_layer_matmul;
  const ParameterInfo* embedding = nullptr;
  const ParameterInfo* largest_outside = nullptr;
  const ParameterInfo* query = nullptr;
  const ParameterInfo* key = nullptr;
  bool has_head = false;
  // Per unit name and shape index, the dimension a parameter's declared logical axes give
  // tensor parallelism (the strategies' rules: heads, kv_heads, mlp, vocab and a Mixture of
  // Experts' experts to the model axis), or -1 where its axes name none of them.
  std::map<std::pair<std::string, std::size_t>, int> declared_split;
  // Key/value projections, by unit name and shape index: their heads stay whole.
  std::set<std::pair<std::string, std::size_t>> kv_projections;
  const auto record_axes = [&](const ParameterInfo& p, const ModelShape::Unit& unit) {
    if (!p.logical_axes) return;
    int split = -1;
    for (std::size_t d = 0; d < p.logical_axes->size() && split < 0; ++d) {
      const std::string& axis = (*p.logical_axes)[d];
      if (axis == "heads" || axis == "kv_heads" || axis == "mlp" || axis == "vocab" ||
          axis == "experts") {
        split = static_cast<int>(d);
      }
    }
    declared_split[{unit.name, unit.shapes.size()}] = split;
  };
  ModelShape::Unit before{"embeddings", false, {}, {}};
  ModelShape::Unit after{"final", false, {}, {}};
  // Shapes that tensor parallelism never splits (position embeddings), by unit name and index.
  std::set<std::pair<std::string, std::size_t>> whole_for_good;
  std::map<std::int64_t, ModelShape::Unit> layer_units;
  for (const ParameterInfo& p : manifest.parameters) {
    const std::int64_t count = num_elements(p.shape);
    shape.parameters = checked_add(shape.parameters, count, "parameters");
    const std::optional<std::int64_t> layer = names.layer_index(p.name);
    if (layer) {
      ModelShape::Unit& unit = layer_units[*layer];
      unit.name = "layer " + std::to_string(*layer);
      unit.layer = true;
      record_axes(p, unit);
      const bool kv_axis =
          p.logical_axes && !p.logical_axes->empty() && p.logical_axes->front() == "kv_heads";
      if (kv_axis || contains_any(p.name, {"k_proj", "v_proj", ".wk", ".wv"})) {
        kv_projections.emplace(unit.name, unit.shapes.size());
      }
      unit.shapes.push_back(p.shape);
      unit.read_widened.push_back(p.shape.size() < 2 || p.name.ends_with("bias"));
      unit.experts.push_back(p.shape.size() == 3 && p.logical_axes && !p.logical_axes->empty() &&
                             p.logical_axes->front() == "experts");
      per_layer[*layer] = checked_add(per_layer[*layer], count, "layer parameters");
      if (p.shape.size() >= 2) {  // a matrix, or matrices stacked (Q, K and V)
        // A Mixture of Experts' stacked experts: each token runs k of them, so its products
        // count k / experts of them.
        const bool stacked_experts = p.shape.size() == 3 && p.logical_axes &&
                                     !p.logical_axes->empty() &&
                                     p.logical_axes->front() == "experts" && manifest.transformer &&
                                     manifest.transformer->moe();
        const std::int64_t run =
            stacked_experts ? count / p.shape[0] *
                                  static_cast<std::int64_t>(manifest.transformer->experts_per_token)
                            : count;
        shape.matmul_parameters = checked_add(shape.matmul_parameters, run, "parameters");
        per_layer_matmul[*layer] = checked_add(per_layer_matmul[*layer], run, "layer parameters");
        if (is_mlp(p.name)) ++mlp_matrices[*layer];
        if (contains_any(p.name, {"q_proj", ".wq"})) query = &p;
        if (contains_any(p.name, {"k_proj", ".wk"})) key = &p;
      }
      continue;
    }
    if (is_output_head(p.name)) {
      has_head = true;
      record_axes(p, after);
      after.shapes.push_back(p.shape);
      after.read_widened.push_back(p.shape.size() < 2);
      if (p.shape.size() == 2) {
        shape.matmul_parameters = checked_add(shape.matmul_parameters, count, "parameters");
      }
      continue;
    }
    ModelShape::Unit& outside = names.place_in_stage(p.name, {1, 1}).stage == 1 ? after : before;
    if (is_position_embedding(p.name)) whole_for_good.emplace(outside.name, outside.shapes.size());
    record_axes(p, outside);
    outside.shapes.push_back(p.shape);
    outside.read_widened.push_back(!is_token_embedding(p.name));
    if (p.shape.size() == 2 && is_position_embedding(p.name)) {
      shape.context = std::max(shape.context, p.shape[0]);
    }
    if (p.shape.size() == 2 && !is_position_embedding(p.name)) {
      if (is_token_embedding(p.name)) embedding = &p;
      if (largest_outside == nullptr || count > num_elements(largest_outside->shape)) {
        largest_outside = &p;
      }
    }
  }
  if (per_layer.empty()) {
    throw InvalidArgument(
        "the model has no parameter with a layer index in its name (such as "
        "'layers.7.' or 'h.7.'): the planner needs transformer layers");
  }
  if (embedding == nullptr) embedding = largest_outside;
  if (embedding == nullptr) {
    throw InvalidArgument(
        "the model has no token embedding matrix (vocab x hidden) outside its "
        "layers");
  }
  shape.layers = static_cast<std::int64_t>(per_layer.size());
  for (const auto& [layer, count] : per_layer) {
    shape.layer_parameters = std::max(shape.layer_parameters, count);
    shape.layer_matmul_parameters =
        std::max(shape.layer_matmul_parameters, per_layer_matmul[layer]);
  }
  shape.vocab = embedding->shape[0];
  shape.hidden = embedding->shape[1];
  if (shape.vocab < 1 || shape.hidden < 1) {
    throw InvalidArgument("the token embedding '" + embedding->name + "' has shape " +
                          to_string(embedding->shape) +
                          "; expected vocab x hidden, both at least 1");
  }
  if (!before.shapes.empty()) shape.units.push_back(std::move(before));
  for (auto& [layer, unit] : layer_units) shape.units.push_back(std::move(unit));
  if (!after.shapes.empty()) shape.units.push_back(std::move(after));
  for (ModelShape::Unit& unit : shape.units) {
    for (std::size_t i = 0; i < unit.shapes.size(); ++i) {
      const Shape& dims = unit.shapes[i];
      int split = -1;
      if (const auto declared = declared_split.find({unit.name, i});
          declared != declared_split.end()) {
        split = declared->second;
      } else if (dims.size() == 2 && whole_for_good.count({unit.name, i}) == 0) {
        split = dims[0] != shape.hidden || dims[1] == shape.hidden ? 0 : 1;
      } else if (dims.size() == 1 && dims[0] != shape.hidden) {
        split = 0;
      }
      unit.model_split.push_back(split);
    }
  }
  shape.tied_embeddings = !has_head;
  if (!has_head) {  // the output head is the tied token embedding
    shape.matmul_parameters =
        checked_add(shape.matmul_parameters, num_elements(embedding->shape), "parameters");
  }
  // The MLP's width: its matrices' dimension that is not the hidden size. A Mixture of Experts'
  // (its parameters' first axis "experts"): each expert's down matrix's (experts x hidden x
  // width); its router (experts x hidden) is no MLP matrix.
  for (const ParameterInfo& p : manifest.parameters) {
    if (!names.layer_index(p.name) || !is_mlp(p.name)) continue;
    const bool experts =
        p.logical_axes && !p.logical_axes->empty() && p.logical_axes->front() == "experts";
    if (experts) {
      if (p.shape.size() == 3 && p.shape[1] == shape.hidden) {
        shape.ffn = std::max(shape.ffn, p.shape[2]);
      }
      continue;
    }
    if (p.shape.size() != 2) continue;
    for (std::int64_t d : p.shape) {
      if (d != shape.hidden) shape.ffn = std::max(shape.ffn, d);
    }
  }
  if (shape.ffn == 0) shape.ffn = shape.hidden;
  shape.gated_mlp = !mlp_matrices.empty() && mlp_matrices.begin()->second == 3;
  std::optional<std::int64_t> stated;  // the manifest's own count of heads
  if (const auto unit = manifest.axis_units.find("heads"); unit != manifest.axis_units.end()) {
    const std::int64_t width = query != nullptr ? query->shape[0] : shape.hidden;
    if (unit->second > width || width % unit->second != 0) {
      throw InvalidArgument("the model's head size (axis_units.heads) " +
                            std::to_string(unit->second) + " does not divide its query width " +
                            std::to_string(width));
    }
    shape.head_dim = unit->second;
    stated = width / unit->second;
  }
  if (heads) {
    if (*heads < 1) {
      throw InvalidArgument(heads_field + " is " + std::to_string(*heads) +
                            "; expected at least 1");
    }
    if (*heads > shape.hidden || shape.hidden % *heads != 0) {
      throw InvalidArgument(heads_field + " " + std::to_string(*heads) +
                            " does not divide the hidden size " + std::to_string(shape.hidden));
    }
    if (stated && *stated != *heads) {
      throw InvalidArgument(heads_field + " " + std::to_string(*heads) + ": the model has " +
                            std::to_string(*stated) + " heads");
    }
    if (!stated) shape.head_dim = shape.hidden / *heads;
    stated = heads;
  }
  if (!stated) {
    throw InvalidArgument(
        "the model does not say how many attention heads it has (a manifest's "
        "\"axis_units\": {\"heads\": head_dim}, or " +
        heads_field + ")");
  }
  shape.heads = *stated;
  shape.kv_heads = key != nullptr ? key->shape[0] / shape.head_dim : shape.heads;
  for (ModelShape::Unit& unit : shape.units) {
    unit.split_heads.assign(unit.shapes.size(), 0);
    for (std::size_t i = 0; i < unit.shapes.size(); ++i) {
      if (kv_projections.count({unit.name, i}) != 0 && unit.model_split[i] == 0) {
        unit.split_heads[i] = unit.shapes[i][0] / shape.head_dim;
      }
    }
  }
  if (manifest.transformer) {
    // A stated shape sizes the activations; the parameters size the state. A file whose two
    // disagree would be planned as two models at once: refused, naming the field.
    const TransformerShape& t = *manifest.transformer;
    const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> fields[] = {
        {"layers", {static_cast<std::int64_t>(t.layers), shape.layers}},
        {"hidden", {static_cast<std::int64_t>(t.hidden), shape.hidden}},
        {"heads", {static_cast<std::int64_t>(t.heads), shape.heads}},
        {"kv_heads", {static_cast<std::int64_t>(t.kv_heads), shape.kv_heads}},
        {"head_dim", {static_cast<std::int64_t>(t.head_dim), shape.head_dim}},
        // (With dense layers among routed ones, the wider of the two.)
        {t.moe() ? (t.mixed_layers() ? "expert_width and mlp_width" : "expert_width") : "mlp_width",
         {static_cast<std::int64_t>(
              t.moe() ? (t.mixed_layers() ? std::max(t.expert_width, t.mlp_width) : t.expert_width)
                      : t.mlp_width),
          shape.ffn}},
        {"vocab", {static_cast<std::int64_t>(t.vocab), shape.vocab}},
        {"mlp", {t.mlp == MlpKind::kGatedSilu ? 1 : 0, shape.gated_mlp ? 1 : 0}},
        {"tied_head", {t.tied_head ? 1 : 0, shape.tied_embeddings ? 1 : 0}}};
    for (const auto& [field, values] : fields) {
      if (values.first != values.second) {
        throw InvalidArgument("transformer." + std::string(field) + " is " +
                              std::to_string(values.first) + ", but the parameters make it " +
                              std::to_string(values.second));
      }
    }
  }
  shape.transformer = manifest.transformer;
  return shape;
}

}  // namespace shardwise::plan
