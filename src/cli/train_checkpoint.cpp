#include "train_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cli {
namespace {

nlohmann::json gpt_json(const models::GptConfig& gpt) {
  return {{"n_layer", gpt.n_layer},
          {"n_head", gpt.n_head},
          {"n_embd", gpt.n_embd},
          {"block_size", gpt.block_size},
          {"vocab_size", gpt.vocab_size}};
}

std::string gpt_text(const models::GptConfig& gpt) {
  return "n_layer " + std::to_string(gpt.n_layer) + ", n_head " + std::to_string(gpt.n_head) +
         ", n_embd " + std::to_string(gpt.n_embd) + ", block_size " +
         std::to_string(gpt.block_size) + ", vocab_size " + std::to_string(gpt.vocab_size);
}

// A model's metadata object in words: a GPT's sizes, or the object itself.
std::string describe(const std::string& model_json) {
  try {
    const nlohmann::json model = nlohmann::json::parse(model_json);
    models::GptConfig gpt;
    for (const auto& [key, field] : {std::pair{"n_layer", &gpt.n_layer},
                                     {"n_head", &gpt.n_head},
                                     {"n_embd", &gpt.n_embd},
                                     {"block_size", &gpt.block_size},
                                     {"vocab_size", &gpt.vocab_size}}) {
      *field = model.at(key).get<std::size_t>();
    }
    return "a GPT of " + gpt_text(gpt);
  } catch (const std::exception&) {
    return "a model of " + echo_input(model_json, 200);
  }
}

}  // namespace

std::string gpt_metadata_json(const models::GptConfig& gpt) { return gpt_json(gpt).dump(); }

train::CheckpointedModel gpt_checkpointed_model(const models::GptConfig& gpt) {
  return {gpt_metadata_json(gpt), describe, models::gpt_parameters(gpt)};
}

CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index, const std::string& what) {
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  CheckpointInfo info;
  info.step = train::checkpoint_step(index, what);
  const auto model = metadata.find("model");
  if (model == metadata.end() || !model->is_object()) {
    throw ckpt::CheckpointError(what + ": metadata \"model\" is missing");
  }
  const auto field = [&](const char* key) -> std::size_t {
    const auto it = model->find(key);
    if (it == model->end() || !it->is_number_unsigned() || it->get<std::uint64_t>() > (1U << 30)) {
      throw ckpt::CheckpointError(what + ": metadata model." + key + " is missing or not a size");
    }
    return it->get<std::size_t>();
  };
  info.gpt = {field("n_layer"), field("n_head"), field("n_embd"), field("block_size"),
              field("vocab_size")};
  try {
    models::validate(info.gpt);
  } catch (const InvalidArgument& e) {
    throw ckpt::CheckpointError(what + ": metadata model: " + e.what());
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    info.has_optimizer = info.has_optimizer || array.name.rfind("optimizer/", 0) == 0;
  }
  return info;
}

}  // namespace shardwise::cli
