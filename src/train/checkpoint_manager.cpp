#include "shardwise/train/checkpoint_manager.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "shardwise/ckpt/checkpoint_error.hpp"
#include "shardwise/ckpt/checkpoint_folders.hpp"
#include "shardwise/ckpt/checkpoint_reader.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/training_state.hpp"

namespace shardwise::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string megabytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// What a resumed checkpoint holds, checked against the run's model.
struct ResumedCheckpoint {
  std::int64_t step = 0;
  bool has_optimizer = false;
};

// The checkpoint's metadata, checked to be of `model` and to hold every array a run of it
// needs, each with its parameter's shape; an expert bias only where the run keeps one
// (`expert_bias`, named as `named` says).
ResumedCheckpoint checked_resume(const ckpt::CheckpointIndex& index, const CheckpointedModel& model,
                                 const std::string& what, bool expert_bias,
                                 const SettingNames& named) {
  ResumedCheckpoint info;
  info.step = checkpoint_step(index, what);
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  const auto saved = metadata.find("model");
  if (saved == metadata.end() || !saved->is_object()) {
    throw ckpt::CheckpointError(what + ": metadata \"model\" is missing");
  }
  if (*saved != nlohmann::json::parse(model.metadata_json)) {
    const std::string saved_text =
        saved->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    throw ckpt::CheckpointError(
        what + " holds " + (model.describe ? model.describe(saved_text) : saved_text) +
        "; the run's model is " +
        (model.describe ? model.describe(model.metadata_json) : model.metadata_json));
  }
  for (const ckpt::ArrayRecord& array : index.arrays) {
    info.has_optimizer = info.has_optimizer || array.name.rfind("optimizer/", 0) == 0;
  }
  std::vector<std::string> arrays = checkpoint_arrays(model.parameters, info.has_optimizer);
  // A model's own state: an expert bias, which a run keeping none would route without.
  for (const ckpt::ArrayRecord& array : index.arrays) {
    if (array.name.rfind(kExpertBiasArrays, 0) != 0) continue;
    if (!expert_bias) {
      throw ckpt::CheckpointError(what + " holds an expert bias ('" + array.name +
                                  "'), which chooses the tokens' experts; this run keeps none, "
                                  "so it would route them otherwise: resume with " +
                                  named("expert_bias_rate") + " above 0");
    }
    arrays.push_back(array.name);
  }
  ckpt::require_arrays(index, arrays, what);
  require_checkpoint_shapes(index, model.parameters, info.has_optimizer, what);
  return info;
}

// Rank 0 makes a new run id and every rank takes it.
std::string agreed_new_run_id(Communicator& comm) {
  std::string id = comm.rank() == 0 ? ckpt::new_run_id() : std::string(32, '0');
  comm.broadcast(id.data(), id.size(), DType::kU8, 0, world_group(comm.size()));
  return id;
}

// The settings of the saved run that the continuation changes, in words, each named as the
// caller names it: "--seed 1337 when saved, 7 now". A run resumed with them all equal continues
// bit for bit.
std::vector<std::string> changed_settings(const std::string& saved_metadata,
                                          const std::string& run_config,
                                          const SettingNames& named) {
  std::vector<std::string> changed;
  if (run_config.empty()) return changed;
  const nlohmann::json saved = nlohmann::json::parse(saved_metadata);
  const nlohmann::json now = nlohmann::json::parse(run_config);
  if (!saved.contains("run") || !saved["run"].is_object()) return changed;
  const nlohmann::json& before = saved["run"];
  for (const char* key :
       {"batch", "seq", "seed", "learning_rate", "warmup", "steps", "weight_decay", "grad_clip",
        "beta1", "beta2", "min_learning_rate_ratio"}) {
    const nlohmann::json* a = before.contains("settings") ? &before["settings"] : nullptr;
    if (a == nullptr || !a->contains(key) || !now["settings"].contains(key)) continue;
    if ((*a)[key] != now["settings"][key]) {
      changed.push_back(named(key) + " " + (*a)[key].dump() + " when saved, " +
                        now["settings"][key].dump() + " now");
    }
  }
  if (before.contains("data") && before["data"].contains("fingerprint") &&
      before["data"]["fingerprint"] != now["data"]["fingerprint"]) {
    changed.push_back("other training data (fingerprint " + before["data"]["fingerprint"].dump() +
                      " when saved, " + now["data"]["fingerprint"].dump() + " now)");
  }
  return changed;
}

}  // namespace

CheckpointedModel checkpointed_model(std::shared_ptr<const ModelDefinition> model) {
  CheckpointedModel checkpointed;
  checkpointed.metadata_json = model->config_json();
  checkpointed.parameters = model->parameters();
  checkpointed.describe = [model](const std::string& json) { return model->describe_config(json); };
  return checkpointed;
}

std::string checkpoint_metadata(const std::string& model_json, std::int64_t step,
                                const std::string& run_config) {
  nlohmann::json metadata{{"step", step}, {"model", nlohmann::json::parse(model_json)}};
  if (!run_config.empty()) metadata["run"] = nlohmann::json::parse(run_config);
  return metadata.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::int64_t checkpoint_step(const ckpt::CheckpointIndex& index, const std::string& what) {
  const nlohmann::json metadata = nlohmann::json::parse(index.metadata_json);
  const auto step = metadata.find("step");
  if (step == metadata.end() || !step->is_number_unsigned() ||
      step->get<std::uint64_t>() > 10'000'000) {
    throw ckpt::CheckpointError(what + ": metadata \"step\" is missing or not 0 to 10000000");
  }
  return step->get<std::int64_t>();
}

std::vector<std::string> checkpoint_arrays(const std::vector<ParameterSpec>& parameters,
                                           bool with_optimizer) {
  std::vector<std::string> names;
  for (const ParameterSpec& spec : parameters) {
    names.push_back(model_array(spec.name));
    if (with_optimizer) {
      names.push_back(exp_avg_array(spec.name));
      names.push_back(exp_avg_sq_array(spec.name));
    }
  }
  return names;
}

void require_checkpoint_shapes(const ckpt::CheckpointIndex& index,
                               const std::vector<ParameterSpec>& parameters, bool with_optimizer,
                               const std::string& what) {
  for (const ParameterSpec& spec : parameters) {
    std::vector<std::string> arrays{model_array(spec.name)};
    if (with_optimizer) {
      arrays.push_back(exp_avg_array(spec.name));
      arrays.push_back(exp_avg_sq_array(spec.name));
    }
    for (const std::string& name : arrays) {
      const ckpt::ArrayRecord* array = index.find(name);
      if (array == nullptr) continue;  // require_arrays names what is missing
      if (array->shape != spec.shape || array->dtype != ParameterStore::kElementType) {
        throw ckpt::CheckpointError(
            what + ": array '" + name + "' is " + shardwise::to_string(array->shape) + " " +
            shardwise::to_string(array->dtype) + "; the metadata's model has " +
            shardwise::to_string(spec.shape) + " " +
            shardwise::to_string(ParameterStore::kElementType));
      }
    }
  }
}

std::string non_finite_value(std::span<const ParameterStore::Element> values,
                             const std::string& array, const ShardIndex& box,
                             const std::string& what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    return what + ": array '" + echo_input(array, 200) + "' holds " + std::to_string(values[i]) +
           " (element " + std::to_string(i) + " of the block " + shardwise::to_string(box) +
           "); a model to train, export or import holds finite values only";
  }
  return {};
}

ResumePoint check_resume(const CheckpointPolicy& policy, const CheckpointedModel& model,
                         std::int64_t steps) {
  const SettingNames& named = policy.names;
  if (!policy.resume) return {};
  const ckpt::CheckpointReader reader(ckpt::resolve_checkpoint(*policy.resume));
  const std::string what = named("resume") + " '" + echo_input(*policy.resume, 200) + "'";
  const ResumedCheckpoint info =
      checked_resume(reader.index(), model, what, policy.expert_bias, named);
  reader.check_files();
  if (info.step > steps) {
    throw InvalidArgument(what + " is of step " + std::to_string(info.step) + ", past " +
                          named("steps") + " " + std::to_string(steps));
  }
  return {info.step};
}

namespace {
bool saves_at(const CheckpointPolicy& flags, std::int64_t steps, std::int64_t after,
              std::int64_t step) {
  return flags.save && step > after && step <= steps &&
         ((flags.save_every > 0 && step % flags.save_every == 0) || step == steps);
}

}  // namespace

void check_checkpoint_policy(const CheckpointPolicy& flags, std::int64_t steps,
                             const ResumePoint& resume) {
  const SettingNames& named = flags.names;
  if (flags.init_from && flags.resume) {
    throw InvalidArgument(named("init_from") + " and " + named("resume") +
                          " both say where the run starts; give one (" + named("resume") +
                          " continues a "
                          "run, " +
                          named("init_from") + " starts a new one from a model's values)");
  }
  if (!flags.save) {
    if (flags.save_every != 0)
      throw InvalidArgument(named("save_every") + " needs " + named("save") + " PATH");
    if (flags.keep != 0) throw InvalidArgument(named("keep") + " needs " + named("save") + " PATH");
    if (flags.save_async)
      throw InvalidArgument(named("save_async") + " needs " + named("save") + " PATH");
  }
  if (flags.save_every < 0 || flags.save_every > steps) {
    throw InvalidArgument(named("save_every") + " is " + std::to_string(flags.save_every) +
                          "; expected 0 (the last step only) to " + named("steps") + " " +
                          std::to_string(steps));
  }
  if (flags.keep < 0 || flags.keep > 1'000'000) {
    throw InvalidArgument(named("keep") + " is " + std::to_string(flags.keep) +
                          "; expected 0 (keep every one) to 1000000");
  }
  if (flags.save && flags.save->empty()) throw InvalidArgument(named("save") + " is an empty path");
  if (flags.save) {
    // Found now, not after the run: a folder that cannot be made or written. Nothing is made
    // here (the first save makes it), so that input refused later leaves nothing behind: the
    // folder itself where it exists, else the nearest folder above it, must be writable.
    std::error_code error;
    std::filesystem::path probe = std::filesystem::absolute(*flags.save, error);
    while (!error && !std::filesystem::exists(probe, error) && probe != probe.parent_path()) {
      probe = probe.parent_path();
    }
    if (error || !std::filesystem::is_directory(probe, error) ||
        ::access(probe.c_str(), W_OK | X_OK) != 0) {
      throw InvalidArgument(named("save") + " '" + echo_input(*flags.save, 200) +
                            "' is not a folder this run can write" +
                            (error ? ": " + error.message() : std::string()));
    }
  }
  if (flags.resume && flags.resume->empty())
    throw InvalidArgument(named("resume") + " is an empty path");
  if (!flags.save || !std::filesystem::is_directory(*flags.save)) return;
  // A step this run saves must not land on a folder that is not its own: found now, not after
  // the steps before it.
  std::error_code error;
  for (std::filesystem::directory_iterator it(*flags.save, error), end; !error && it != end;
       it.increment(error)) {
    const std::int64_t step = ckpt::step_of_folder_name(it->path().filename().string());
    if (step < 0 || !saves_at(flags, steps, resume.step, step)) continue;
    // This run's id is new (a continuation is a run of its own): whatever is there is not its.
    const ckpt::SavePlace place = ckpt::inspect_save_place(it->path(), "");
    if (place.occupant != ckpt::SavePlace::Occupant::kOther) continue;
    throw InvalidArgument(
        named("save") + " '" + echo_input(*flags.save, 200) + "': '" +
        echo_input(it->path().string(), 200) + "' " + place.why + ", and this run saves step " +
        std::to_string(step) + " there; it is left as it is: save into another folder" +
        (resume.step > 0 ? " (a run continued from step " + std::to_string(resume.step) +
                               " saves its later steps as a branch of its own)"
                         : std::string()));
  }
}

CheckpointManager::CheckpointManager(CheckpointPolicy policy, Communicator& comm, Trainer& trainer,
                                     CheckpointedModel model, std::string run_config, Say say)
    : policy_(std::move(policy)),
      comm_(comm),
      trainer_(trainer),
      model_(std::move(model)),
      run_config_(std::move(run_config)),
      say_(std::move(say)) {
  if (!policy_.save) return;
  std::string error;
  if (comm_.rank() == 0) {
    try {
      lock_ = std::make_unique<ckpt::SaveFolderLock>(*policy_.save);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  ckpt::throw_unless_all_succeeded(comm_, error, "checkpoints not saved");
}

CheckpointManager::~CheckpointManager() {
  // A run that failed leaves its background save uncommitted: no index, never loadable (the
  // save's destructor waits for its writer and removes its folder).
  pending_.reset();
}

void CheckpointManager::note(const std::string& text) {
  if (comm_.rank() == 0 && noted_.insert(text).second) say_("note: " + text);
}

void CheckpointManager::initialise() {
  const auto start = Clock::now();
  std::vector<ParameterBlock> blocks;
  const std::string prefix = model_array("");
  for (const StateBlock& block : trainer_.state_blocks()) {
    if (block.optimizer || block.model_state) continue;
    blocks.push_back(
        {block.array.substr(prefix.size()), block.shape, block.box, block.as<float>()});
  }
  std::string error;
  try {
    policy_.init_from(blocks);
  } catch (const std::exception& e) {  // a file system's error too, not only bad input
    error = e.what();
  }
  ckpt::throw_unless_all_succeeded(comm_, error, "not initialised");
  say_("initialised from " + policy_.init_from_words + " in " +
       std::to_string(seconds_since(start)).substr(0, 5) + " s");
}

std::int64_t CheckpointManager::resume() {
  const SettingNames& named = policy_.names;
  run_id_ = agreed_new_run_id(comm_);
  if (!policy_.resume) {
    if (policy_.init_from) initialise();
    return 0;
  }
  const auto start = Clock::now();
  const std::string what = named("resume") + " '" + echo_input(*policy_.resume, 200) + "'";
  // Every rank opens and checks the checkpoint; what one finds wrong all report.
  std::optional<ckpt::CheckpointReader> reader;
  ResumedCheckpoint info;
  std::vector<ckpt::BlockToLoad> targets;
  std::string error;
  try {
    reader.emplace(ckpt::resolve_checkpoint(*policy_.resume));
    info = checked_resume(reader->index(), model_, what, policy_.expert_bias, named);
    for (const StateBlock& block : trainer_.state_blocks()) {
      if (block.optimizer && !info.has_optimizer) continue;
      // The model's own state (an expert bias) starts as it is where the checkpoint has none.
      if (block.model_state && reader->index().find(block.array) == nullptr) continue;
      targets.push_back({block.array, block.shape, block.dtype, block.box, block.bytes()});
    }
  } catch (const std::exception& e) {  // a file system's error too, not only bad input
    error = e.what();
  }
  ckpt::throw_unless_all_succeeded(comm_, error, "checkpoint not loaded");
  // The same bytes, not only the same step: hosts whose file systems show different files at
  // the path would each load their own.
  char checksum[16];
  std::snprintf(checksum, sizeof checksum, "%08x", reader->index_checksum());
  ckpt::require_same_on_every_rank(
      comm_,
      utf8_text(reader->folder().string()) + " at step " + std::to_string(info.step) +
          ", index.json CRC-32C " + checksum,
      "checkpoint not loaded: the ranks found different checkpoints in " + what);
  const ckpt::ReadStats stats = ckpt::load_checkpoint(comm_, *reader, targets);
  // A value that is not finite would train on as NaN: named instead.
  for (const ckpt::BlockToLoad& target : targets) {
    using Element = ParameterStore::Element;
    const std::span<const Element> values(reinterpret_cast<const Element*>(target.bytes.data()),
                                          target.bytes.size() / sizeof(Element));
    if (error.empty()) error = non_finite_value(values, target.array, target.box, what);
  }
  ckpt::throw_unless_all_succeeded(comm_, error, "checkpoint not loaded");
  ancestors_ = reader->index().ancestors;
  if (!reader->index().run_id.empty()) ancestors_.push_back({reader->index().run_id, info.step});
  trainer_.resume_at(info.step);
  say_("resumed from " + echo_input(reader->folder().string(), 200) + " at step " +
       std::to_string(info.step) +
       (info.has_optimizer ? "" : " (no optimizer state: the moments start at zero)") + ", read " +
       megabytes(stats.bytes_read) + " on rank 0 in " +
       std::to_string(seconds_since(start)).substr(0, 5) + " s");
  for (const std::string& change :
       changed_settings(reader->index().metadata_json, run_config_, policy_.names)) {
    say_("note: " + change + "; the run continues, but not as the saved one would have");
  }
  return info.step;
}

void CheckpointManager::after_step(std::int64_t step, std::int64_t steps) {
  if (!policy_.save) return;
  if (pending_ && pending_->save->every_rank_wrote()) commit_pending();
  const bool due = (policy_.save_every > 0 && step % policy_.save_every == 0) || step == steps;
  if (!due) return;
  if (pending_) commit_pending();  // waits for its writer: one save in flight at a time
  save(step);
}

void CheckpointManager::finish() {
  if (pending_) commit_pending();
}

void CheckpointManager::save(std::int64_t step) {
  const SettingNames& named = policy_.names;
  const auto start = Clock::now();
  const std::filesystem::path folder =
      std::filesystem::path(*policy_.save) / ckpt::step_folder_name(step);
  std::vector<StateBlock> state = trainer_.state_blocks();
  std::vector<ckpt::BlockToSave> blocks;
  for (const StateBlock& block : state) {
    if (!block.saved) continue;
    blocks.push_back({block.array, block.shape, block.dtype, block.sharding, block.box,
                      std::as_bytes(block.bytes())});
  }
  const std::string metadata = checkpoint_metadata(model_.metadata_json, step, run_config_);
  if (comm_.rank() == 0) {
    try {
      // No save of this run is in flight now: what its earlier ones left when killed goes.
      for (const std::string& text : ckpt::remove_leftovers(*policy_.save, run_id_, ancestors_))
        note(text);
      const std::vector<ckpt::SavedStep> saved = ckpt::list_checkpoints(*policy_.save);
      if (!warned_newer_ && !saved.empty() && saved.back().step > step) {
        warned_newer_ = true;
        note(echo_input(saved.back().folder.string(), 200) + " is newer than this run's step " +
             std::to_string(step) + "; " + named("keep") + " leaves it, and " + named("resume") +
             " " + echo_input(*policy_.save, 200) + " would pick it");
      }
    } catch (const std::exception& e) {
      say_(std::string("warning: ") + e.what());
    }
  }
  ckpt::SaveOptions options;
  options.run_id = run_id_;
  options.ancestors = ancestors_;
  if (!policy_.save_async) {
    const ckpt::SaveStats stats = ckpt::save_checkpoint(comm_, folder, blocks, metadata, options);
    prune(step);
    say_("saved " + echo_input(folder.string(), 200) + " (" + megabytes(stats.bytes_total) + ", " +
         std::to_string(seconds_since(start)).substr(0, 5) + " s)");
    return;
  }
  auto pending = std::make_unique<Pending>();
  pending->step = step;
  pending->save = std::make_unique<ckpt::CheckpointSave>(comm_, folder, blocks, metadata, options);
  // The copies are what the step waits for; the writing goes on beside the next steps.
  for (const std::size_t i : pending->save->written_here()) {
    pending->copies.emplace_back(blocks[i].bytes.begin(), blocks[i].bytes.end());
  }
  std::vector<std::span<const std::byte>> spans;
  for (const std::vector<std::byte>& copy : pending->copies) spans.emplace_back(copy);
  pending->save->write_in_background(std::move(spans));
  pending->blocked_seconds = seconds_since(start);
  pending_ = std::move(pending);
}

void CheckpointManager::prune(std::int64_t saved_step) {
  if (policy_.keep == 0 || comm_.rank() != 0) return;
  try {
    for (const std::string& text :
         ckpt::keep_newest(*policy_.save, static_cast<std::size_t>(policy_.keep), saved_step,
                           run_id_, ancestors_)) {
      note(text);
    }
  } catch (const std::exception& e) {  // the save itself is whole: a warning, not the run's end
    say_(std::string("warning: ") + e.what());
  }
}

void CheckpointManager::commit_pending() {
  std::unique_ptr<Pending> pending = std::move(pending_);
  const auto start = Clock::now();
  const ckpt::SaveStats stats = pending->save->commit();
  prune(pending->step);
  const double commit_wait = seconds_since(start);
  say_("saved " +
       echo_input(
           (std::filesystem::path(*policy_.save) / ckpt::step_folder_name(pending->step)).string(),
           200) +
       " in the background (" + megabytes(stats.bytes_total) + "; the step waited " +
       std::to_string(pending->blocked_seconds).substr(0, 6) + " s for the copy, a later one " +
       std::to_string(commit_wait).substr(0, 6) + " s for the write and commit)");
}

}  // namespace shardwise::train
