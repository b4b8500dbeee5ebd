#include "shardwise/models/model_registry.hpp"

#include <mutex>
#include <nlohmann/json.hpp>

#include "../detail/json_reader.hpp"
#include "detail/gpt_config_json.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/models/gpt.hpp"
#include "shardwise/models/hf_gpt2.hpp"
#include "shardwise/models/hf_llama.hpp"
#include "shardwise/models/llama.hpp"

namespace shardwise::models {
namespace {

// A configuration object's "family", or "" where it has none (or is no object).
std::string family_of(std::string_view json) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object()) return "";
  const auto it = parsed.find("family");
  return it != parsed.end() && it->is_string() ? it->get<std::string>() : "";
}

ModelFamily gpt_family() {
  ModelFamily family;
  family.name = "gpt";
  family.summary =
      "GPT-2 as nanoGPT writes it: learned positions, LayerNorm, GELU, the head tied to the "
      "token embedding";
  family.presets = {"tiny", "small", "gpt2"};
  family.preset = [](const std::string& name) {
    return std::make_shared<GptDefinition>(gpt_preset(name, "model"));
  };
  family.from_config = [](std::string_view json, const std::string& what) {
    nlohmann::json parsed = shardwise::detail::parse_json(json, what);
    if (parsed.is_object()) parsed.erase("family");
    return std::make_shared<GptDefinition>(detail::gpt_config_of(parsed, what));
  };
  // The GPT's files and checkpoints predate "family": its keys say it.
  family.recognizes = [](std::string_view json) {
    const std::string named = family_of(json);
    if (!named.empty()) return named == "gpt";
    const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
    return !parsed.is_discarded() && detail::is_gpt_config(parsed);
  };
  family.hugging_face = std::make_shared<HfGpt2Adapter>();
  return family;
}

// The Llama and the families that are a Llama with one part changed.
ModelFamily llama_family(LlamaVariant variant, std::string summary) {
  ModelFamily family;
  family.name = to_string(variant);
  family.summary = std::move(summary);
  family.presets = llama_preset_names(variant);
  family.preset = [](const std::string& name) {
    return std::make_shared<LlamaDefinition>(llama_preset(name, "model"));
  };
  family.from_config = [](std::string_view json, const std::string& what) {
    return std::make_shared<LlamaDefinition>(llama_config_from_json(json, what));
  };
  family.recognizes = [variant](std::string_view json) { return is_llama_config(json, variant); };
  family.hugging_face = std::make_shared<HfLlamaAdapter>(variant);
  return family;
}

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<ModelFamily>& registry() {
  static std::vector<ModelFamily> families{
      gpt_family(),
      llama_family(LlamaVariant::kLlama,
                   "Llama as transformers writes it: rotary positions, RMSNorm, SwiGLU, "
                   "grouped-query attention, a tied or untied head"),
      llama_family(LlamaVariant::kQwen2, "Qwen2: a Llama with biases on q, k and v"),
      llama_family(LlamaVariant::kQwen3,
                   "Qwen3: a Llama with an RMSNorm over each head's queries and keys"),
      llama_family(LlamaVariant::kMixtral,
                   "Mixtral: a Llama whose MLPs are routed experts (top-k of a softmax, "
                   "renormalised), dropless"),
      llama_family(LlamaVariant::kQwen3Moe,
                   "Qwen3-MoE: a Qwen3 whose MLPs are routed experts (norm_topk_prob), dropless")};
  return families;
}

}  // namespace

const std::vector<ModelFamily>& model_families() {
  const std::lock_guard lock(registry_mutex());
  return registry();
}

void register_model_family(ModelFamily family) {
  const std::lock_guard lock(registry_mutex());
  for (const ModelFamily& known : registry()) {
    if (known.name == family.name) {
      throw InvalidArgument("a model family named '" + family.name + "' is registered already");
    }
    for (const std::string& preset : family.presets) {
      for (const std::string& taken : known.presets) {
        if (preset == taken) {
          throw InvalidArgument("the preset '" + preset + "' is the family '" + known.name +
                                "''s already");
        }
      }
    }
  }
  registry().push_back(std::move(family));
}

const ModelFamily& model_family(const std::string& name, const std::string& field) {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    if (family.name == name) return family;
    names += (names.empty() ? "" : ", ") + family.name;
  }
  throw InvalidArgument(field + ": '" + echo_input(name) + "' is not a model family (" + names +
                        ")");
}

std::string preset_names() {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    for (const std::string& preset : family.presets) {
      names += (names.empty() ? "" : ", ") + preset;
    }
  }
  return names;
}

bool is_preset(const std::string& name) {
  for (const ModelFamily& family : model_families()) {
    for (const std::string& preset : family.presets) {
      if (preset == name) return true;
    }
  }
  return false;
}

std::shared_ptr<const train::ModelDefinition> model_from_preset(const std::string& name,
                                                                const std::string& field) {
  for (const ModelFamily& family : model_families()) {
    for (const std::string& preset : family.presets) {
      if (preset == name) return family.preset(name);
    }
  }
  throw InvalidArgument(field + ": '" + echo_input(name) + "' is not a model (" + preset_names() +
                        " or a JSON file)");
}

bool is_model_config(std::string_view json) {
  for (const ModelFamily& family : model_families()) {
    if (family.recognizes(json)) return true;
  }
  return false;
}

std::shared_ptr<const train::ModelDefinition> model_from_config(std::string_view json,
                                                                const std::string& what) {
  for (const ModelFamily& family : model_families()) {
    if (family.recognizes(json)) return family.from_config(json, what);
  }
  const std::string named = family_of(json);
  if (!named.empty()) (void)model_family(named, what);  // names the known families
  throw InvalidArgument(what + " describes no model family the registry knows");
}

namespace {

// The adapter that reads config.json's model_type `type`; null where none does.
const HfAdapter* adapter_of_type(const std::string& type) {
  for (const ModelFamily& family : model_families()) {
    if (!family.hugging_face) continue;
    for (const std::string& known : family.hugging_face->model_types()) {
      if (known == type) return family.hugging_face.get();
    }
  }
  return nullptr;
}

}  // namespace

std::string hf_model_types() {
  std::string names;
  for (const ModelFamily& family : model_families()) {
    if (!family.hugging_face) continue;
    for (const std::string& type : family.hugging_face->model_types()) {
      names += (names.empty() ? "" : ", ") + type;
    }
  }
  return names;
}

std::shared_ptr<const train::ModelDefinition> model_from_hf_config(
    std::string_view json, const std::string& what, std::vector<std::string>& notes) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, false);
  if (!parsed.is_object()) return nullptr;
  const auto type = parsed.find("model_type");
  if (type == parsed.end() || !type->is_string()) return nullptr;
  const HfAdapter* adapter = adapter_of_type(type->get<std::string>());
  return adapter == nullptr ? nullptr
                            : adapter->model_from_hf_config(std::string(json), what, notes);
}

std::shared_ptr<const train::ModelDefinition> model_from_hf_config(std::string_view json,
                                                                   const std::string& what) {
  std::vector<std::string> notes;
  return model_from_hf_config(json, what, notes);
}

std::shared_ptr<const train::ModelDefinition> read_hf_config(std::string_view json,
                                                             const std::string& what,
                                                             std::vector<std::string>& notes) {
  const nlohmann::json parsed = shardwise::detail::parse_json(json, what);
  const std::string read = "; shardwise reads the model_types " + hf_model_types();
  if (!parsed.is_object()) {
    throw InvalidArgument(what + " holds " + echo_input(parsed.dump(), 60) +
                          ", not a JSON object of a model's fields");
  }
  const auto type = parsed.find("model_type");
  if (type == parsed.end()) throw InvalidArgument(what + ": \"model_type\" is missing" + read);
  if (!type->is_string()) {
    throw InvalidArgument(what + ": \"model_type\" is " + echo_input(type->dump(), 60) +
                          ", not a name" + read);
  }
  const HfAdapter* adapter = adapter_of_type(type->get<std::string>());
  if (adapter == nullptr) {
    throw InvalidArgument(what + ": \"model_type\" is " + echo_input(type->dump(), 60) +
                          ", which no model family reads" + read);
  }
  return adapter->model_from_hf_config(std::string(json), what, notes);
}

}  // namespace shardwise::models
