#pragma once
// A trained model wherever a user keeps it, ready to compute with on any layout: a checkpoint
// (a folder holding index.json), the newest checkpoint in a `--save` folder, or a Hugging Face
// folder (config.json and model.safetensors, or a sharded model.safetensors.index.json) of a
// registered family, also as Hugging Face's cache keeps it (models--org--name/snapshots/<rev>/,
// whose files are links into ../../blobs/). `shardwise generate` and `shardwise ckpt loss` read
// models through it.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/ckpt/checkpoint_index.hpp"
#include "shardwise/train/checkpoint_manager.hpp"
#include "shardwise/train/model_definition.hpp"

namespace shardwise::models {

// What a training checkpoint's metadata says of its model: the model, built by its family in
// the registry, its step, and whether it holds optimizer state. CheckpointError naming the field
// where the metadata lacks the step or a model of a known family.
struct CheckpointInfo {
  std::shared_ptr<const train::ModelDefinition> model;
  std::int64_t step = 0;
  bool has_optimizer = false;
};
[[nodiscard]] CheckpointInfo checkpoint_info(const ckpt::CheckpointIndex& index,
                                             const std::string& what);
// CheckpointError naming `what` and the array where the index lacks one of the model's
// parameters or holds it in another shape or dtype.
void require_model_arrays(const ckpt::CheckpointIndex& index, const train::ModelDefinition& model,
                          const std::string& what);

struct ModelSource {
  std::shared_ptr<const train::ModelDefinition> model;
  // In words for messages: "checkpoint 'runs/a/step-150'", "Hugging Face folder 'gpt2'".
  std::string words;
  std::optional<std::int64_t> step;  // a checkpoint's
  // The folder's tokenizer.json (Hugging Face folders); empty where there is none.
  std::filesystem::path tokenizer;
  // The ids that end a text, as transformers' generate() stops on them: a Hugging Face
  // folder's generation_config.json's eos_token_id (one or a list: Llama 3's instruct models
  // stop on three) where it says one, else config.json's; as the files say them (a generator
  // checks them against the vocabulary where it uses them).
  std::vector<std::int64_t> end_tokens;
  // The file they came from, quoted, for messages ("'gpt2/generation_config.json'"); empty
  // where there are none.
  std::string end_tokens_from;
  // What the model's reader took without knowing it, one line each, naming the file and the
  // field ("... field 'foo' is not known to shardwise's Llama reader; taken as not changing the
  // computation"): for a command to show once (rank 0, stderr). Empty for checkpoints.
  std::vector<std::string> notes;
  // What every rank must agree on of the values (a checkpoint's index.json checksum; a Hugging
  // Face folder's files, sampled), so that ranks given different weights of the same shapes (two
  // hosts seeing different newest checkpoints) are refused rather than computing with half of
  // each.
  std::string identity;
  // Fills any rank's blocks of the model's parameters with the source's values, each checked
  // finite (train::InitialValues: the same call a run's --init-from makes).
  train::InitialValues values;
};

// The model `path` names, checked whole before anything of its size is read: its arrays
// present with the model's shapes, its files whole. InvalidArgument or CheckpointError naming
// `field` and the path otherwise.
[[nodiscard]] ModelSource open_model_source(const std::string& path, const std::string& field);

// The source's values into a whole (one-rank) model's store, every parameter whole.
void load_whole(const ModelSource& source, train::ParameterStore& store);

}  // namespace shardwise::models
